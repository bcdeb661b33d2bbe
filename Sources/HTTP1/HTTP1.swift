// TEMPORARY stub until the HTTP1 module lands.
public struct HTTPField: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(name: String, value: String) { self.name = name; self.value = value }
}
