/// `access:` (CONTRACT.md "The configuration file"): who may use the proxy, and for what.
public struct AccessConfiguration: Sendable, Equatable {
    public var requireHeader: String? = nil
    public var requireValue: Secret? = nil
    public var allowPaths: [String]? = nil  // nil: any path
    public var allowMethods: [String]? = nil  // nil: any method; uppercased
    public var allowHosts: [String]? = nil  // nil: the contract's default (point 9)
    public var allowOrigins: [String] = []
    public var unixMode: UInt32 = 0o660
    public init() {}
}

extension AccessConfiguration {
    static func parse(_ s: YAMLSection, in load: LoadContext) -> AccessConfiguration {
        load.found.collect { try s.rejectUnknownKeys(Keys.sections["access"]!) }
        var a = AccessConfiguration()
        let headerBefore = load.found.errors.count
        load.found.collect {
            guard let header = try s.nonEmptyString("require_header") else { return }
            guard header.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "!#$%&'*+-.^_`|~".contains($0)) }) else {
                throw ConfigurationError(keyPath: "access.require_header", reason: "is not a valid header name")
            }
            a.requireHeader = header
        }
        a.requireValue = load.found.collect { try load.readSecret(s, "require_value", literal: true) }
        if load.found.errors.count == headerBefore {
            load.found.collect {
                if a.requireHeader != nil, a.requireValue == nil {
                    throw ConfigurationError(
                        keyPath: "access.require_header", reason: "needs require_value_env or require_value_file (the value clients must send)")
                }
                if a.requireHeader == nil, a.requireValue != nil {
                    throw ConfigurationError(keyPath: "access.require_header", reason: "required when a require_value is set (the header that carries it)")
                }
            }
        }
        load.found.collect {
            guard let paths = try s.stringList("allow_paths", example: "[/users/, /orders/]") else { return }
            for (index, path) in paths.enumerated() where !path.hasPrefix("/") {
                throw ConfigurationError(keyPath: "access.allow_paths[\(index)]", reason: "\"\(path)\" must start with /")
            }
            a.allowPaths = paths
        }
        load.found.collect {
            guard let methods = try s.stringList("allow_methods", example: "[GET, POST]") else { return }
            for (index, method) in methods.enumerated()
            where method.isEmpty || !method.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) {
                throw ConfigurationError(keyPath: "access.allow_methods[\(index)]", reason: "\"\(method)\" is not an HTTP method")
            }
            a.allowMethods = methods.map { $0.uppercased() }
        }
        load.found.collect {
            guard let hosts = try s.stringList("allow_hosts", example: "[localhost, 127.0.0.1]") else { return }
            for (index, host) in hosts.enumerated() where host.trimmingWhitespace().isEmpty {
                throw ConfigurationError(keyPath: "access.allow_hosts[\(index)]", reason: "must not be empty")
            }
            a.allowHosts = hosts.map { $0.lowercased() }
        }
        if let origins = load.found.collect({ try s.stringList("allow_origins", example: "[https://app.example.com]") }) { a.allowOrigins = origins }
        load.found.collect {
            guard let mode = try s.string("unix_mode") else { return }
            let digits = mode.trimmingWhitespace()
            guard !digits.isEmpty, digits.count <= 4, digits.allSatisfy({ ("0"..."7").contains($0) }), let value = UInt32(digits, radix: 8) else {
                throw ConfigurationError(keyPath: "access.unix_mode", reason: "\"\(mode)\" is not an octal file mode such as \"0660\"")
            }
            a.unixMode = value
        }
        return a
    }
}
