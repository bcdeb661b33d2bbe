/// An upstream response head: the status, the reason and the fields (``FieldBlock``, each stored
/// normalised as `Name: value` in one buffer that its owner reuses from response to response: a
/// response costs no String per field, and a field goes to the client as one copy of its bytes).
public struct ResponseHead: Sendable, Equatable {
    /// The proxy answers in HTTP/1.1 whatever version the upstream spoke, so only these are kept.
    public var status = 0
    public var reason = ""
    public var fields = FieldBlock()
    /// The lowercased options listed in the Connection fields other than `close` and `keep-alive`
    /// (RFC 9110 §7.6.1): more hop-by-hop fields.
    public var connectionOptions: [String] = []

    public init() {}

    /// Whether field `index` must not be forwarded (RFC 9110 §7.6.1), by this head's own Connection options.
    public func isHopByHop(_ index: Int) -> Bool {
        fields.isHopByHop(index, connectionOptions: connectionOptions)
    }
}
