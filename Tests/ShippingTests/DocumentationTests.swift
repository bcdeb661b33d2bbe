import Config
import Foundation
import TestSupport
import Testing

/// `README.md` against the code, so the two cannot drift apart.
@Suite struct DocumentationTests {
    @Test func everyKnownKeyIsInTheConfigurationReference() throws {
        let docs = try ShippedFiles.text(ShippedFiles.readmeSections)
        for key in ConfigurationLoader.knownKeys {
            let documented = docs.contains("`\(key)`")  // a Bool, so a failure does not print the whole file
            #expect(documented, "README.md does not document `\(key)`")
        }
    }

    /// The `limits:` table and the fixed limits in README.md are the code's one table (`Limits`).
    @Test func theLimitsTablesAreTheCodesTable() throws {
        let readme = try String(contentsOf: RepositoryPaths.root.appendingPathComponent("README.md"), encoding: .utf8)
        let keys = Limits.readmeRows.joined(separator: "\n")
        let keysListed = readme.contains("| --- | --- | --- |\n" + keys + "\n\n")
        #expect(keysListed, "README.md's limits table is not Limits.readmeRows:\n\(keys)")
        let fixed = Limits.fixedReadmeRows.joined(separator: "\n")
        let fixedListed = readme.contains("| --- | --- | --- |\n" + fixed + "\n\n")
        #expect(fixedListed, "README.md's fixed limits are not Limits.fixedReadmeRows:\n\(fixed)")
    }

    /// Every series a live /metrics exposes is listed.
    @Test func everyExposedMetricIsListed() throws {
        let docs = try ShippedFiles.text(ShippedFiles.readmeSections)
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: http://127.0.0.1:9/base
                workers: 1
                admin:
                  listen: 127.0.0.1:0
                credentials:
                  type: static
                  token_env: SHIPPING_TOKEN
                """,
            environment: ["SHIPPING_TOKEN": "shipping-token-\(UUID().uuidString)"])
        defer {
            proxy.terminate()
            _ = try? proxy.waitForExit()
        }
        let metrics = try curl(["http://\(try #require(proxy.adminAddress))/metrics"])
        #expect(metrics.status == 200, "\(metrics.stderr)")
        let names = metrics.bodyString.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("# TYPE ") else { return nil }
            return line.split(separator: " ").dropFirst(2).first.map(String.init)
        }
        #expect(names.contains("tokenproxy_requests_total"))
        for name in names {
            let listed = docs.contains("`\(name)")
            #expect(listed, "README.md does not list the metric \(name)")
        }
    }

    /// Every subcommand `tokenproxy --help` lists is in the tour or the how-tos.
    @Test func everySubcommandIsDocumented() throws {
        let docs = try ShippedFiles.text(ShippedFiles.readmeSections)
        let help = try ProxyProcess.run(args: ["--help"])
        #expect(help.status == 0, "\(help.output)")
        let section = try #require(help.stdout.components(separatedBy: "SUBCOMMANDS:").last)
        let commands = section.split(separator: "\n").compactMap { line -> String? in
            let word = line.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init)
            // A subcommand line is indented two spaces; its description's continuation lines, more.
            guard let word, line.hasPrefix("  "), !line.hasPrefix("   "), word.allSatisfy({ $0.isLetter && $0.isLowercase }) else {
                return nil
            }
            return word
        }.filter { $0 != "help" }
        #expect(commands.count >= 6, "\(help.stdout)")
        for command in commands {
            let shown = docs.contains("tokenproxy \(command)")
            #expect(shown, "README.md never shows `tokenproxy \(command)`")
        }
    }

    /// The error table names every code the proxy answers with: those the JSON error bodies carry.
    @Test func errorTableListsTheContractCodes() throws {
        let docs = try ShippedFiles.text(ShippedFiles.readmeSections)
        let codes = [
            "bad_request", "client_authorization_rejected", "login_required", "forbidden_host", "forbidden_origin",
            "forbidden_client", "forbidden_path", "forbidden_target", "method_not_allowed", "request_timeout",
            "body_too_large", "headers_too_large", "not_implemented", "bad_gateway", "token_unavailable", "overloaded",
            "upstream_timeout",
        ]
        for code in codes {
            let listed = docs.contains("| `\(code)` |")
            #expect(listed, "the error table has no row for \(code)")
        }
    }
}
