import Config
import Foundation
import TestSupport
import Testing

/// Every ```yaml block of README.md, Docker/README.md and docs/*.md (issue 39 point 8): a whole
/// configuration passes `tokenproxy check`; a fragment uses only keys the loader knows.
@Suite struct DocumentedConfigurationTests {
    /// One ```yaml block: the file it is in, the line its fence is on, its text.
    struct Block: CustomTestStringConvertible, Sendable {
        var file: String
        var line: Int
        var yaml: String
        var testDescription: String { "\(file):\(line)" }

        var topLevelKeys: [String] {
            yaml.split(separator: "\n").compactMap { line -> String? in
                guard let first = line.first, first.isLetter, let colon = line.firstIndex(of: ":") else { return nil }
                return String(line[..<colon])
            }
        }

        /// The rule: a block is a whole configuration when it has a top-level `listen:` and
        /// `credentials:` or `routes:`, and elides nothing (`…`). Any other block is a fragment (a
        /// section shown alone, a pod spec, a Prometheus rule, a sketch).
        var isWholeConfiguration: Bool {
            let keys = Set(topLevelKeys)
            return keys.contains("listen") && (keys.contains("credentials") || keys.contains("routes")) && !yaml.contains("…")
        }

        /// A fragment of a tokenproxy file: every top-level key is one of the file's.
        var isTokenproxyFragment: Bool {
            let root = Set(ConfigurationLoader.knownKeys.filter { !$0.contains(".") })
            let keys = topLevelKeys
            return !keys.isEmpty && keys.allSatisfy(root.contains)
        }
    }

    static let documents: [String] = {
        let docs = RepositoryPaths.root.appendingPathComponent("docs")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []).filter { $0.hasSuffix(".md") }.sorted()
        return ["README.md", "Docker/README.md"] + names.map { "docs/\($0)" }
    }()

    /// Every ```yaml block of `documents`, in order.
    static let blocks: [Block] = documents.flatMap { name -> [Block] in
        guard let text = try? String(contentsOf: RepositoryPaths.root.appendingPathComponent(name), encoding: .utf8) else { return [] }
        return fencedBlocks(in: text).filter { $0.language == "yaml" }.map { Block(file: name, line: $0.line, yaml: $0.text) }
    }

    @Test func theDocumentsHoldWholeConfigurationsAndFragments() {
        #expect(Self.blocks.count >= 30, "\(Self.blocks.count) yaml blocks found")
        #expect(Self.blocks.filter(\.isWholeConfiguration).count >= 8)
        #expect(Self.blocks.contains { $0.file == "docs/API-KEYS.md" && $0.yaml.contains("basic_username: x-access-token") && $0.isWholeConfiguration })
    }

    /// Each whole configuration, written to a folder of its own, passes `check` with a dummy value
    /// for every `*_env` variable it names, without a warning.
    @Test(arguments: blocks.filter(\.isWholeConfiguration))
    func aWholeConfigurationPassesCheck(_ block: Block) throws {
        let dir = try TempDir(prefix: "documented-config")
        let path = try dir.write("tokenproxy.yaml", block.yaml)
        let secrets = ExampleConfigurationTests.dummySecrets(for: ExampleKeys(yaml: block.yaml).environmentNames)
        let result = try ProxyProcess.run(args: ["check", "--config", path], env: secrets)
        #expect(result.status == 0, "\(block.file):\(block.line):\n\(block.yaml)\n\(result.output)")
        #expect(!result.stderr.contains("warning"), "\(block.file):\(block.line) draws warnings:\n\(result.stderr)")
    }

    /// A fragment of a tokenproxy file uses only keys the loader knows (a typo, or a key of another
    /// section, shows here).
    @Test(arguments: blocks.filter { !$0.isWholeConfiguration && $0.isTokenproxyFragment })
    func aFragmentUsesOnlyKnownKeys(_ block: Block) {
        let known = Set(ConfigurationLoader.knownKeys)
        for key in ExampleKeys(yaml: block.yaml).keys {
            let isKnown = known.contains(key)
            #expect(isKnown, "\(block.file):\(block.line) uses \(key), which is not a configuration key")
        }
    }
}
