import ArgumentParser
import Credentials

struct Logout: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete the stored tokens (and revoke the refresh token where configured).")
    @OptionGroup var options: ConfigOption
    @OptionGroup var route: RouteOption

    func run() throws {
        let loaded = route.select(options.load(), command: "logout")
        let logger = startLogging(loaded)
        let source = sessionSource(loaded, logger: logger, command: "logout")
        do {
            if let warning = try source.logout() { logger.warning("logout: \(warning)") }
            say("logged out; the stored tokens are deleted")
        } catch let error as TokenSourceError {
            fail("logout: \(error.reason)", status: 1)
        }
    }
}
