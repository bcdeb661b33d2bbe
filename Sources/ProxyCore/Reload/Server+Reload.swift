import Config
import Credentials
import Dispatch
import Synchronization

/// How a reload ended: in effect, or refused with every error of the file (`key: reason`).
public enum ReloadOutcome: Sendable {
    case success
    case failure([String])
}

/// The server's side of a reload (`Reloader` reads and checks the file, then calls `reload`).
extension Server {
    /// Counts one reload attempt (CONTRACT: every refused attempt counts once).
    public func countReload(succeeded: Bool) {
        reloads.withLock { if succeeded { $0.success += 1 } else { $0.failed += 1 } }
    }

    /// Puts `configuration` in effect (CONTRACT "Reload without a restart"): new listeners are bound
    /// first (a failed bind throws and changes nothing), then every loop takes the new routes for
    /// the requests that start after it, then listeners that left the file stop and close; their
    /// connections finish the exchange in progress. Returns when every loop has the new routes.
    public func reload(configuration new: Configuration, states: [RouteState]) throws {
        try reloading.withLock { _ in
            let count = perLoop.count
            let old = groups
            let fresh = try Server.bindGroups(new, loops: count, keeping: old)
            let freshTLS: [ListenerTLS?]
            let newForwardProxy: ForwardProxyTLS?
            do {
                freshTLS = try Server.listenerTLS(new, for: fresh)
                newForwardProxy = try Server.forwardProxy(new, keeping: forwardProxy)
                try openAuditLog(new, previous: configuration)
            } catch {
                for group in fresh where !old.contains(where: { $0.sharesSockets(with: group) }) { group.close() }
                throw error
            }
            for (group, tls) in zip(fresh, freshTLS) { group.tls = tls }
            watchedTLS.withLock { $0 = freshTLS.compactMap { $0 } }
            publishOwnAddresses(fresh)
            forwardProxy = newForwardProxy
            let added = fresh.filter { group in !old.contains { $0 === group } }
            let removed = old.filter { group in !fresh.contains { $0 === group } }
            // A group handed to another route keeps its sockets; its connections follow the address
            // to the route that owns it now (route names, nil for the shared listener).
            var successors: [String?: String?] = [:]
            for group in removed {
                if let successor = added.first(where: { $0.sharesSockets(with: group) }) { successors[group.ownRoute] = successor.ownRoute }
            }
            let handedOver = successors
            let closed = removed.filter { group in !added.contains { $0.sharesSockets(with: group) } }
            let telemetrySwap = try telemetryForReload(new)
            current.withLock { $0 = (new, states) }
            let done = DispatchGroup()
            for (i, mine) in perLoop.enumerated() {
                done.enter()
                mine.ctx.loop.execute { [self] in
                    mine.ctx.replace(configuration: new, states: states, forwardProxy: newForwardProxy)
                    if let telemetrySwap { mine.ctx.tracer = telemetrySwap.tracer(on: mine.ctx.loop) }
                    // Old acceptors first: a handed-over socket is then watched again, for its new route.
                    let stopping = Set(removed.flatMap { $0.sockets.map { ObjectIdentifier($0) } })
                    for acceptor in mine.acceptors where stopping.contains(ObjectIdentifier(acceptor.listener)) { acceptor.stop() }
                    mine.acceptors.removeAll { stopping.contains(ObjectIdentifier($0.listener)) }
                    for group in added {
                        do {
                            try watch(group, loop: i)
                        } catch {
                            logger.error("reload: \(error)")
                        }
                    }
                    // Connections of a listener that left the file finish their exchange, then close.
                    // (A closed group without a route of its own is the shared listener, moved elsewhere.)
                    let gone = closed.map(\.ownRoute)
                    for connection in Array(mine.ctx.connections.values) {
                        let route = connection.ownRoute
                        if gone.contains(route) {
                            connection.beginDrain()
                        } else if let successor = handedOver[route] {
                            connection.ownRoute = successor
                        }
                    }
                    done.leave()
                }
            }
            done.wait()
            finishTelemetrySwap(telemetrySwap, new, states: states)
            for group in closed { group.close() }
            groups = fresh
            listenAddress = fresh[0].address
            for group in added {
                if let route = group.ownRoute {
                    logger.info("route \(route) listening on \(group.address)")
                } else {
                    logger.info("listening on \(group.address)")
                }
            }
        }
    }
}
