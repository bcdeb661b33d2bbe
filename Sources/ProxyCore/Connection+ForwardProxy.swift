import HTTP1
import Sockets
import TLS

/// The forward proxy on a client connection (CONTRACT "HTTPS for clients", docs/FORWARD-PROXY.md):
/// a CONNECT answered, refused or handed to a `ByteTunnel`, the switch into TLS once its 200 is out
/// (`ConnectionMachine.WrittenAction.startTunnelTLS`), and the pin every request in the tunnel meets.
extension Connection {
    /// CONNECT: a `host` route's name opens a tunnel the proxy ends TLS in; anything else is 403
    /// (or 405 without `forward_proxy`, on a route's own listener, or on a TLS listener, where the
    /// tunnel's TLS would run inside the listener's).
    func connect(_ head: consuming RequestHead) {
        guard let forward = ctx.forwardProxy, ownRoute == nil, !machine.speaksTLS else {
            let error: ProxyError = machine.pin != nil ? .refusedConnect("a CONNECT inside a tunnel is not served") : .methodNotAllowed
            respond(error, to: open(head, route: nil))
            return
        }
        let target = head.target
        // The tunnel outlives this exchange whatever the CONNECT's HTTP version said.
        head.keepAlive = true
        let settings = forward.settings
        switch ForwardProxyRules.decide(connectTarget: target, table: ctx.routes.table, otherHosts: settings.otherHosts, egress: settings.egress) {
        case .refuse(let why):
            ctx.metrics.forwardProxyConnect(route: nil, outcome: .refused)
            let exchange = open(head, route: nil)
            exchange.tunnelHost = TunnelPin.loggable(target)
            respond(.refusedConnect(why), to: exchange)
        case .tunnel(let host, let port):
            // Bytes both ways to a host no route names: the socket is the tunnel's from here on.
            // The key of any route that requires one opens it (no route's own rules apply).
            let keys = ctx.routes.routes.filter { $0.policy.requiredHeader != nil }
            guard keys.isEmpty || keys.contains(where: { $0.policy.admitsConnect(head) }) else {
                ctx.metrics.forwardProxyConnect(route: nil, outcome: .refused)
                let exchange = open(head, route: nil)
                exchange.tunnelHost = host
                respond(.forbiddenClient, to: exchange)
                return
            }
            let auditClient = ctx.auditing ? self.auditClient : nil
            ByteTunnel.start(
                ctx: ctx, clientFD: fd, host: host, port: port, egress: settings.egress, early: relinquishSocket().unread, auditClient: auditClient)
        case .intercept(let index, let host, let port):
            let route = ctx.routes.routes[index]
            let admitted = route.policy.admitsConnect(head)
            let exchange = open(head, route: route)
            exchange.tunnelHost = host
            guard admitted else {
                ctx.metrics.forwardProxyConnect(route: route, outcome: .refused)
                respond(.forbiddenClient, to: exchange)
                return
            }
            let session: TLSSession
            do {
                session = try forward.session(fd: fd, host: host)
            } catch {
                ctx.logger.error("forward proxy: no certificate for \(host): \(error)")
                ctx.metrics.forwardProxyConnect(route: route, outcome: .refused)
                respond(.badGateway("the proxy could not make a certificate for this host"), to: exchange)
                return
            }
            ctx.metrics.forwardProxyConnect(route: route, outcome: .intercepted)
            // The session waits for the 200 to be written; the machine says when it takes the socket.
            tls = session
            machine.onConnectAnswered(TunnelPin(host: host, port: port))
            machine.exchange.onProxyAnswer(closesConnection: false)
            exchange.record.answered(status: 200, refusal: nil)
            let bytes = Forwarder.connectionEstablished
            exchange.record.wroteOut(bytes.count)
            appendOut(bytes)
            responseDone(exchange)
        }
    }

    /// A CONNECT's 200 has gone out and its exchange is over (`WrittenAction.startTunnelTLS`): the
    /// TLS session takes the socket, and requests in it are this tunnel's (X-Forwarded-Proto https).
    func startTunnelTLS() {
        forwardedForLines = Forwarder.forwardedForLines(peerHost: peer.host, https: true)
        continueHandshake()
    }

    /// A request inside a forward-proxy tunnel: the pin, then the route table with the tunnel's host.
    func beginInTunnel(_ head: consuming RequestHead, _ pin: TunnelPin) {
        let target: AccessPolicy.ParsedTarget
        do {
            target = try AccessPolicy.parse(head)
        } catch {
            respond(error, to: openInTunnel(head, route: nil))
            return
        }
        let absolute = target.absolute.map { (host: $0.host, port: $0.port, scheme: $0.scheme) }
        guard ForwardProxyRules.pin(hostField: head.first("host"), absolute: absolute, tunnelHost: pin.host, tunnelPort: pin.port) else {
            respond(.misdirectedRequest, to: openInTunnel(head, route: nil))
            return
        }
        switch ctx.routes.select(head, ownRoute: nil, tunnelHost: pin.host) {
        case .failure(let error):
            respond(error, to: openInTunnel(head, route: nil))
        case .success(let selection):
            let route = selection.route
            let checked = route.policy.check(head, selection.target, strip: selection.strip, inTunnel: true)
            proceed(openInTunnel(head, route: route), route: route, checked: checked)
        }
    }

    func openInTunnel(_ head: consuming RequestHead, route: LoopRoute?) -> Exchange {
        let exchange = open(head, route: route)
        exchange.tunnelHost = machine.pin?.host
        return exchange
    }
}
