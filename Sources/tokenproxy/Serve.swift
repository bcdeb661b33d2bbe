import ArgumentParser
import Config
import Credentials
import Foundation
import ProxyCore
import Sockets
import TLS
import Telemetry

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the proxy in the foreground until SIGTERM or SIGINT.")
    @OptionGroup var options: ConfigOption

    func run() throws {
        // First, before anything uses OpenSSL: no cleanup at exit racing the loops' threads as they end.
        OpenSSLProcess.keepStateUntilExit()
        let loaded = options.load()
        let configuration = loaded.configuration
        if let problem = listenerTLSProblems(configuration).first { fail("configuration error: \(problem)", status: Exit.badConfiguration) }
        if let problem = spoolFolderProblems(configuration).first { fail("configuration error: \(problem)", status: Exit.badConfiguration) }
        // Signals are taken by one thread with sigwait; block them before any other thread exists.
        var signals = sigset_t()
        sigemptyset(&signals)
        for s in [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2] { sigaddset(&signals, s) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)

        let logger = startLogging(loaded)
        Server.announceOwnAddresses(of: configuration)
        let plan: RouteStatePlan
        do {
            plan = try RouteStatePlan(configuration, previous: nil) { try TokenManager(configuration: $0, logger: logger) }
        } catch {
            fail("cannot set up credentials: \(error)", status: Exit.badConfiguration)
        }
        let server = Server(configuration: configuration, states: plan.states, logger: logger)
        // The audit log is open before the first fetch, whose credential event it records.
        server.observeCredentials(configuration, states: plan.states)
        do {
            try server.openAuditLog(configuration, previous: nil)
        } catch {
            fail("configuration error: \(error)", status: Exit.badConfiguration)
        }
        // Before the first refresh, so that the start's `credential.refresh` is traced too.
        server.setUpTelemetry { TelemetryExporter.make($0, version: Version.tokenproxy, logger: logger) }
        for tokens in plan.created { tokens.start() }
        let stopTokens = { for state in plan.created { state.stop() } }
        let reloader = Reloader(path: options.path, loaded: loaded, server: server, logger: logger, registerSecrets: registerConfiguredSecrets)
        server.reloadHandler = { reloader.reload() }
        do {
            try server.start()
        } catch let error as ListenerError {
            logger.error("\(error)")
            stopTokens()
            Glibc.exit(Exit.runtimeFailure)
        } catch {
            logger.error("cannot start serving: \(error)")
            stopTokens()
            Glibc.exit(Exit.runtimeFailure)
        }
        reloader.watch()
        let stop = DispatchSemaphore(value: 0)
        let waitForSignals = {
            var stopping = false
            while true {
                var received: Int32 = 0
                guard sigwait(&signals, &received) == 0 else { continue }
                switch received {
                case SIGHUP:
                    logger.info("SIGHUP: forcing a refresh")
                    if let result = server.forceRefresh() {
                        let routes = { (names: [String]) in server.configuration.hasRoutes ? " for \(names.joined(separator: ", "))" : "" }
                        if !result.withoutSession.isEmpty { logger.warning("SIGHUP: no session to refresh\(routes(result.withoutSession))") }
                        if !result.deferred.isEmpty {
                            logger.warning(
                                "SIGHUP: forced refreshes back off like failed ones: deferred\(routes(result.deferred)), done in \(result.retryAfter) s")
                        }
                    }
                case SIGUSR1:
                    // Log rotation (CONTRACT "Audit log"): the audit file at its path, made again.
                    do {
                        try server.reopenAuditLog()
                        logger.info("SIGUSR1: audit log reopened")
                    } catch {
                        logger.error("SIGUSR1: \(error)")
                    }
                case SIGUSR2:
                    logger.info("SIGUSR2: reloading the configuration")
                    DispatchQueue.global().async { _ = reloader.reload() }
                default:
                    if stopping {
                        logger.warning("second stop signal: exiting at once")
                        Glibc.exit(Exit.runtimeFailure)
                    }
                    stopping = true
                    logger.info("stop signal: draining")
                    stop.signal()
                }
            }
        }
        do {
            try OSThread.start(name: "tp-signals", waitForSignals)
        } catch {
            logger.error("cannot start the signal thread: \(error)")
            stopTokens()
            Glibc.exit(Exit.runtimeFailure)
        }
        stop.wait()
        server.drain()
        for state in server.routeStates { state.tokens.stop() }
        server.flushTelemetry()
        logger.info("stopped")
        Glibc.exit(0)
    }
}
