import Sockets

/// How upstream connections are made (from `upstream_tls` and `limits`).
public struct UpstreamSettings: Sendable {
    public var caFile: String?
    public var clientCertFile: String?
    public var clientKeyFile: String?
    public var insecureSkipVerify: Bool
    /// Until the response head arrives (connect included).
    public var headTimeout: Double
    public var proxy: ProxyEnvironment

    public init(
        caFile: String? = nil, clientCertFile: String? = nil, clientKeyFile: String? = nil, insecureSkipVerify: Bool = false,
        headTimeout: Double = 60, proxy: ProxyEnvironment = ProxyEnvironment(proxy: "", noProxy: "")
    ) {
        self.caFile = caFile
        self.clientCertFile = clientCertFile
        self.clientKeyFile = clientKeyFile
        self.insecureSkipVerify = insecureSkipVerify
        self.headTimeout = headTimeout
        self.proxy = proxy
    }
}

/// The proxy curl would use for one URL scheme, read from the environment once (CONTRACT: upstream
/// calls honour HTTPS_PROXY / HTTP_PROXY / NO_PROXY as curl does). Given to libcurl explicitly,
/// so that it does not read five environment variables again for every request.
public struct ProxyEnvironment: Sendable, Equatable {
    /// The proxy URL; empty for none.
    public let proxy: String
    /// Where `proxy` came from (a variable's name), nil for none.
    public let source: String?
    /// Hosts that bypass the proxy (curl's NO_PROXY syntax); empty for none.
    public let noProxy: String

    public init(proxy: String, source: String? = nil, noProxy: String) {
        self.proxy = proxy
        self.source = source
        self.noProxy = noProxy
    }

    /// As curl reads them: `http_proxy` in lower case only (the upper-case name can be set by a CGI
    /// request's `Proxy:` header), `https_proxy` or `HTTPS_PROXY`, then `all_proxy` or `ALL_PROXY`.
    public init(scheme: String, environment: (String) -> String? = ProxyEnvironment.processEnvironment) {
        let names = scheme == "https" ? ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] : ["http_proxy", "all_proxy", "ALL_PROXY"]
        var found: (String, String)?
        for name in names {
            if let value = environment(name), !value.isEmpty {
                found = (value, name)
                break
            }
        }
        proxy = found?.0 ?? ""
        source = found?.1
        noProxy = environment("no_proxy") ?? environment("NO_PROXY") ?? ""
    }

    public static func processEnvironment(_ name: String) -> String? {
        Syscall.environment(name)
    }
}

public enum UpstreamFailure: Error, Sendable, CustomStringConvertible {
    /// Could not connect, resolve, or complete TLS.
    case unreachable(String)
    /// The connection was not made within `headTimeout`.
    case timedOut

    public var description: String {
        switch self {
        case .unreachable(let m): return "upstream unreachable: \(m)"
        case .timedOut: return "no response head from the upstream in time"
        }
    }
}
