import Config
import Foundation
import TestSupport
import Testing

/// The reference (docs/CONFIGURATION.md) against the code, so the two cannot drift apart; and every
/// relative link of README.md and docs/*.md leads to a file and heading that exist.
@Suite struct DocumentationTests {
    @Test func everyKnownKeyIsInTheConfigurationReference() throws {
        let docs = try ShippedFiles.text(ShippedFiles.configurationReference)
        for key in ConfigurationLoader.knownKeys {
            let documented = docs.contains("`\(key)`")  // a Bool, so a failure does not print the whole file
            #expect(documented, "docs/CONFIGURATION.md does not document `\(key)`")
        }
    }

    /// The `limits:` table and the fixed limits in docs/CONFIGURATION.md are the code's one table (`Limits`).
    @Test func theLimitsTablesAreTheCodesTable() throws {
        let readme = try ShippedFiles.text(ShippedFiles.configurationReference)
        let keys = Limits.readmeRows.joined(separator: "\n")
        let keysListed = readme.contains("| --- | --- | --- |\n" + keys + "\n\n")
        #expect(keysListed, "docs/CONFIGURATION.md's limits table is not Limits.readmeRows:\n\(keys)")
        let fixed = Limits.fixedReadmeRows.joined(separator: "\n")
        let fixedListed = readme.contains("| --- | --- | --- |\n" + fixed + "\n\n")
        #expect(fixedListed, "docs/CONFIGURATION.md's fixed limits are not Limits.fixedReadmeRows:\n\(fixed)")
    }

    /// Every series a live /metrics exposes is listed.
    @Test func everyExposedMetricIsListed() throws {
        let docs = try ShippedFiles.text(ShippedFiles.configurationReference)
        let proxy = try ProxyProcess(
            config: staticTokenConfig(upstream: "http://127.0.0.1:9/base", admin: true, tokenEnv: "SHIPPING_TOKEN"),
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
            #expect(listed, "docs/CONFIGURATION.md does not list the metric \(name)")
        }
    }

    /// Every subcommand `tokenproxy --help` lists is in the command line reference.
    @Test func everySubcommandIsDocumented() throws {
        let docs = try ShippedFiles.text(ShippedFiles.configurationReference)
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
            #expect(shown, "docs/CONFIGURATION.md never shows `tokenproxy \(command)`")
        }
    }

    /// The error table names every code the proxy answers with: those the JSON error bodies carry.
    @Test func errorTableListsTheContractCodes() throws {
        let docs = try ShippedFiles.text(ShippedFiles.configurationReference)
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

    /// Issue 40 point 4: README.md is read in ten minutes (at most 400 lines), opens with the two
    /// commands, and its recipes table links one page under docs/ for each topic.
    @Test func theREADMEIsShortAndLinksARecipePerTopic() throws {
        let readme = try ShippedFiles.text(RepositoryPaths.root.appendingPathComponent("README.md"))
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 400, "README.md has \(lines.count) lines")
        #expect(lines.prefix(3) == ["# tokenproxy", "", "```sh"])
        #expect(lines.dropFirst(3).first?.hasPrefix("scripts/demo.sh   # ") == true)
        #expect(lines.dropFirst(5).first?.hasPrefix("scripts/test.sh   # ") == true)
        let table = try #require(readme.components(separatedBy: "\n## Recipes\n").dropFirst().first?.components(separatedBy: "\n## ").first)
        let pages = [
            "LOGIN", "COGNITO", "AWS", "GITHUB", "API-KEYS", "HTTPS-CLIENTS", "TLS-LISTENER", "FLEET", "SANDBOXES", "KUBERNETES",
            "SYSTEMD",
        ]
        for page in pages {
            let linked = table.contains("](docs/\(page).md)")
            #expect(linked, "README.md's recipes table does not link docs/\(page).md")
        }
    }

    /// Every relative link (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`) of README.md and
    /// docs/*.md names a file that exists and, with an anchor, a heading of that Markdown file (its
    /// GitHub anchor). README.md's recipes table alone holds more than a dozen, so finding none fails.
    @Test func everyRelativeLinkResolves() throws {
        let root = RepositoryPaths.root
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
        let pages = ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
        var checked = 0
        for page in pages {
            let url = root.appendingPathComponent(page)
            for target in Self.links(in: try ShippedFiles.text(url)) where !target.contains("://") && !target.hasPrefix("mailto:") {
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let file = parts[0].isEmpty ? url : url.deletingLastPathComponent().appendingPathComponent(parts[0]).standardizedFileURL
                let exists = FileManager.default.fileExists(atPath: file.path)
                #expect(exists, "\(page): the link \(target) names no file")
                if exists, parts.count == 2, file.pathExtension == "md" {
                    let anchors = Self.anchors(of: try ShippedFiles.text(file))
                    #expect(anchors.contains(parts[1]), "\(page): the link \(target) names no heading of \(file.lastPathComponent)")
                }
                checked += 1
            }
        }
        #expect(checked >= 20, "only \(checked) relative links found")
    }

    /// The targets of the inline links outside code blocks.
    static func links(in text: String) -> [String] {
        var targets: [String] = []
        for line in proseLines(of: text) {
            var rest = Substring(line)
            while let open = rest.range(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                targets.append(String(after[..<close]))
                rest = after[close...]
            }
        }
        return targets
    }

    /// GitHub's anchors for the headings: lower case, spaces to `-`, punctuation other than `-` and
    /// `_` dropped, a repeated anchor numbered `-1`, `-2`, ….
    static func anchors(of text: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        for line in proseLines(of: text) where line.hasPrefix("#") {
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
            let slug = String(
                title.lowercased().compactMap { c -> Character? in
                    c == " " ? "-" : (c.isLetter || c.isNumber || c == "-" || c == "_") ? c : nil
                })
            let count = seen[slug, default: 0]
            seen[slug] = count + 1
            anchors.insert(count == 0 ? slug : "\(slug)-\(count)")
        }
        return anchors
    }

    /// The lines outside ``` fences.
    static func proseLines(of text: String) -> [String] {
        var fenced = false
        return text.split(separator: "\n", omittingEmptySubsequences: false).compactMap { line in
            if line.hasPrefix("```") {
                fenced.toggle()
                return nil
            }
            return fenced ? nil : String(line)
        }
    }
}
