import Basics
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

extension ProxyEnvironment {
    /// The proxy for `scheme` from this process's environment, read once per route and loop, and
    /// given to libcurl explicitly so that it does not read five environment variables again for
    /// every request; a variable naming one of the process's own listen addresses is passed over.
    public init(scheme: String) {
        self.init(scheme: scheme, environment: { Syscall.environment($0) })
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
