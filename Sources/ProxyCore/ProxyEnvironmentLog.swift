import Basics
import Config
import Logging
import Sockets
import Upstream

extension Server {
    /// Makes the configured TCP listen addresses the process's own before anything is bound: the
    /// token threads start first, and their identity-provider calls may not go to a proxy variable
    /// that names this process (CONTRACT.md). `start` puts the addresses as bound in their place.
    public static func announceOwnAddresses(of configuration: Configuration) {
        var addresses = [configuration.listen] + configuration.routes.compactMap { $0.match?.listen }
        if let admin = configuration.admin { addresses.append(admin.listen) }
        let listeners = addresses.compactMap { address -> (host: String, port: Int)? in
            guard case .tcp(let host, let port) = address, port != 0 else { return nil }
            return (host: host, port: port)
        }
        OwnListenAddresses.current = OwnListenAddresses(listeners: listeners, localAddresses: SocketAddress.localInterfaceAddresses())
    }

    /// Logs, once at start, each proxy variable passed over because it names one of the process's
    /// own listen addresses (identity-provider calls read the same variables, whatever the routes'
    /// schemes), and the proxy each route's upstream requests go through: the scheme picks the
    /// variable (HTTPS_PROXY or HTTP_PROXY, as curl does), so routes of both schemes may use two.
    func logProxyEnvironment(_ configuration: Configuration) {
        var warned: Set<String> = []
        for scheme in [URLScheme.http, .https] {
            let environment = ProxyEnvironment(scheme: scheme.rawValue)
            for ignored in environment.ignored where warned.insert(ignored.name).inserted {
                logger.warning(
                    "\(ignored.name)=\(maskingUserInfo(ignored.value)) names tokenproxy's own listen address \(ignored.ownAddress): ignored, no upstream or identity provider call goes through it"
                )
            }
            let names = configuration.routes.filter { $0.upstream.urlScheme == scheme }.map(\.name)
            guard !names.isEmpty, let source = environment.proxy.isEmpty ? nil : environment.source else { continue }
            let except = environment.noProxy.isEmpty ? "" : ", except NO_PROXY=\(environment.noProxy)"
            let which = configuration.hasRoutes ? " (routes \(names.joined(separator: ", ")))" : ""
            logger.info("upstream requests go through the proxy \(maskingUserInfo(environment.proxy)) (from \(source))\(except)\(which)")
        }
    }
}

/// `scheme://user:password@host` → `scheme://****@host`.
func maskingUserInfo(_ url: String) -> String {
    guard let slashes = url.firstRange(of: "//") else { return url }
    let authority = url[slashes.upperBound...].prefix { $0 != "/" }
    guard let at = authority.lastIndex(of: "@") else { return url }
    return String(url[..<slashes.upperBound]) + "****" + String(url[at...])
}
