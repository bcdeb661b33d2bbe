/// `forward:` (CONTRACT.md "The configuration file"): what the proxy does to a request on its way upstream.
public struct ForwardConfiguration: Sendable, Equatable {
    public enum ClientAuthorization: String, Sendable, Equatable, CaseIterable { case replace, keep, reject }
    public var clientAuthorization: ClientAuthorization = .replace
    public var preserveHost: Bool = false
    public var retryBodyLimit: Int = 1 << 20
    public var retryMemory: Int = 64 << 20
    /// A chunked request body that ends within this size goes upstream with Content-Length (CONTRACT
    /// point 8: WSGI servers read nothing of a chunked body); 0 turns it off.
    public var requestBuffering: Int = 1 << 20
    /// Beyond `requestBuffering`, a chunked body up to this size is spooled to a 0600 file in the
    /// spool folder and goes with Content-Length too (as nginx does for a WSGI upstream); 0 turns it off.
    public var requestBufferingDisk: Int = 0
    /// `forward.request_buffering_path`: the spool folder, resolved against the configuration file's
    /// folder; nil: the default, `spool/` beside the store's file (`RouteConfiguration.spoolFolder`).
    public var requestBufferingPath: String? = nil
    /// All bodies spooled at once stay within this many bytes of the spool folder; beyond it, a body
    /// streams chunked (CONTRACT `forward.request_buffering_disk`).
    public var requestBufferingDiskTotal: Int = 1 << 30
    public init() {}
}

extension ForwardConfiguration {
    static func parse(_ s: YAMLSection, in load: LoadContext) -> ForwardConfiguration {
        load.found.collect { try s.rejectUnknownKeys(Keys.sections["forward"]!) }
        var f = ForwardConfiguration()
        if let value = load.found.collect({ try s.choice("client_authorization", ForwardConfiguration.ClientAuthorization.self) }) {
            f.clientAuthorization = value
        }
        if let value = load.found.collect({ try s.bool("preserve_host") }) { f.preserveHost = value }
        if let value = load.found.collect({ try s.size("retry_body_limit") }) { f.retryBodyLimit = value }
        if let value = load.found.collect({ try s.size("retry_memory") }) { f.retryMemory = value }
        if let value = load.found.collect({ try s.size("request_buffering") }) { f.requestBuffering = value }
        if let value = load.found.collect({ try s.size("request_buffering_disk") }) { f.requestBufferingDisk = value }
        if let path = load.found.collect({ try load.pathValue(s, "request_buffering_path") }) ?? nil {
            f.requestBufferingPath = path
            if f.requestBufferingDisk == 0 {
                load.warnings.append("\(s.path("request_buffering_path")): used only with forward.request_buffering_disk; ignored")
            }
        }
        if let value = load.found.collect({ try s.size("request_buffering_disk_total") }) {
            if value > 0 {
                f.requestBufferingDiskTotal = value
            } else {
                load.found.record(
                    ConfigurationError(
                        keyPath: s.path("request_buffering_disk_total"), reason: "must be larger than 0 (request_buffering_disk: 0 turns spooling off)"))
            }
        }
        // The disk takes over where memory stops: it means nothing below `request_buffering`.
        if f.requestBufferingDisk > 0 && f.requestBufferingDisk <= f.requestBuffering {
            load.found.record(ConfigurationError(keyPath: s.path("request_buffering_disk"), reason: "must be 0 or larger than forward.request_buffering"))
        } else if f.requestBufferingDisk > 0 && f.requestBuffering == 0 {
            load.found.record(
                ConfigurationError(keyPath: s.path("request_buffering_disk"), reason: "needs forward.request_buffering (the body is spooled beyond it)"))
        }
        return f
    }
}
