import ArgumentParser
import Config
import Credentials
import Foundation
import Logging
import Logs

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the store's state without secrets (every route's, without --route).")
    @OptionGroup var options: ConfigOption
    @OptionGroup var route: RouteOption
    @Flag(help: "Print one JSON object (keyed by route name when the file has routes: and no --route is given).") var json = false

    func run() throws {
        let all = options.load()
        let logger = startLogging(all)
        guard all.configuration.hasRoutes, route.route == nil else {
            let loaded = route.select(all, command: "status")
            let (fields, usable) = statusFields(loaded, logger: logger)
            if json {
                print(object(fields))
            } else {
                for (name, value) in fields where value != nil || name != "ended_reason" { print("\(name): \(value ?? "-")") }
            }
            if !usable { Glibc.exit(1) }
            return
        }
        // Every route (CONTRACT "Several APIs"): text blocks, or one object keyed by route name.
        var members: [String] = []
        var anyUnusable = false
        for i in all.configuration.routes.indices {
            var one = all
            one.configuration = all.configuration.selecting(route: i)
            let name = one.configuration.routes[0].name
            let (fields, usable) = statusFields(one, logger: logger)
            if !usable { anyUnusable = true }
            if json {
                members.append("\(TokenproxyLogHandler.jsonString(name)):\(object(fields))")
            } else {
                print("route \(name):")
                for (key, value) in fields where value != nil || key != "ended_reason" { print("  \(key): \(value ?? "-")") }
            }
        }
        if json { print("{" + members.joined(separator: ",") + "}") }
        if anyUnusable { Glibc.exit(1) }
    }

    private func object(_ fields: [(String, String?)]) -> String {
        let members = fields.map { name, value in "\(TokenproxyLogHandler.jsonString(name)):\(value.map(TokenproxyLogHandler.jsonString) ?? "null")" }
        return "{" + members.joined(separator: ",") + "}"
    }

    /// The fields `status` prints for one route, and whether it can serve without a login (exit 0).
    private func statusFields(_ loaded: LoadedConfiguration, logger: Logger) -> (fields: [(String, String?)], usable: Bool) {
        let credentials = loaded.configuration.credentials
        // A fixed credential has no session to show: nothing is stored, nobody logs in.
        if needsNoSession(credentials, environment: ProcessInfo.processInfo.environment) {
            return ([("kind", credentials.type.rawValue), ("session", SessionStatus.notNeeded)], true)
        }
        let source = sessionSource(loaded, logger: logger, command: "status")
        let status: SessionStatus
        do {
            status = try source.status()
        } catch let error as TokenSourceError {
            fail("status: \(error.reason)", status: 1)
        } catch {
            fail("status: \(error)", status: 1)
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        func time(_ value: Double?) -> String? { value.map { formatter.string(from: Date(timeIntervalSince1970: $0)) } }
        let fields: [(String, String?)] = [
            ("kind", status.kind), ("session", status.sessionText), ("subject", status.subject),
            ("issued_at", time(status.issuedAt)), ("expires_at", time(status.expiresAt)),
            ("refreshable", status.refreshable.map { $0 ? "yes" : "no" }),
            ("last_refresh_at", time(status.lastRefreshAt)), ("last_refresh_outcome", status.lastRefreshOutcome),
            ("ended_reason", status.endedReason),
        ]
        return (fields, status.isUsable)
    }
}
