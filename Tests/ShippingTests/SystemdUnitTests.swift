import Foundation
import TestSupport
import Testing

/// `config/tokenproxy.service`.
@Suite struct SystemdUnitTests {
    /// The unit's directives as (key, value) pairs, comments and section headers left out.
    static func directives() throws -> [(key: String, value: String)] {
        try ShippedFiles.text(ShippedFiles.systemdUnit).split(separator: "\n").compactMap { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#"), !trimmed.hasPrefix("["), let eq = trimmed.firstIndex(of: "=") else { return nil }
            return (String(trimmed[..<eq]), String(trimmed[trimmed.index(after: eq)...]))
        }
    }

    // systemd-analyze ships with systemd; containers and macOS often lack it. Skipped there, and the
    // directive checks below still run.
    @Test(.enabled(if: ShippedFiles.executable("systemd-analyze") != nil, "systemd-analyze is not installed on this machine"))
    func systemdAnalyzeVerifiesTheUnitWithoutComplaint() throws {
        let analyze = try #require(ShippedFiles.executable("systemd-analyze"))
        // verify checks that ExecStart's program exists: point it at the binary under test.
        let binary = RepositoryPaths.tokenproxyBinary.path
        #expect(FileManager.default.isExecutableFile(atPath: binary), "no tokenproxy binary at \(binary): run swift build first")
        let unit = try ShippedFiles.text(ShippedFiles.systemdUnit).replacingOccurrences(of: "/usr/local/bin/tokenproxy", with: binary)
        let dir = try TempDir(prefix: "shipping-systemd")
        let path = try dir.write("tokenproxy.service", unit)
        let result = try runCommand(analyze, arguments: ["verify", path], timeout: 60)
        #expect(result.status == 0, "\(result.output)")
        // verify exits 0 on a directive it cannot parse and only complains: any output is a finding.
        let findings = result.output.split(separator: "\n").filter { $0.contains("tokenproxy.service") }
        #expect(findings.isEmpty, "systemd-analyze verify:\n\(result.output)")
    }

    @Test func unitRunsAsItsOwnUserWithTheRequiredHardening() throws {
        let d = try Self.directives()
        func value(_ key: String) -> String? { d.last { $0.key == key }?.value }
        #expect(value("User") == "tokenproxy")
        #expect(value("StateDirectory") == "tokenproxy")
        #expect(value("ConfigurationDirectory") == "tokenproxy")
        #expect(value("ProtectSystem") == "strict")
        #expect(value("ProtectHome") == "yes")
        #expect(value("PrivateTmp") == "yes")
        #expect(value("NoNewPrivileges") == "yes")
        #expect(value("Restart") == "on-failure")
        #expect(value("ExecReload") == "/bin/kill -HUP $MAINPID")
        #expect(value("KillSignal") == "SIGTERM")
        #expect(value("EnvironmentFile") == "-/etc/tokenproxy/env")
        #expect(value("ExecStart")?.hasPrefix("/usr/local/bin/tokenproxy serve") == true)
    }

    /// systemd must not SIGKILL a drain that the configuration allows: TimeoutStopSec exceeds the
    /// longest drain_timeout of the shipped examples (10 s, the default, where unset).
    @Test func stopTimeoutExceedsDrainTimeout() throws {
        let raw = try #require(try Self.directives().last { $0.key == "TimeoutStopSec" }?.value)
        let stop = try #require(seconds(raw), "TimeoutStopSec=\(raw)")
        var longestDrain = 10.0
        for name in ShippedFiles.exampleNames {
            let text = try ShippedFiles.text(ShippedFiles.config.appendingPathComponent(name))
            for line in text.split(separator: "\n") where line.hasPrefix("drain_timeout:") {
                let value = line.dropFirst("drain_timeout:".count).split(separator: "#")[0].trimmingCharacters(in: .whitespaces)
                longestDrain = max(longestDrain, try #require(seconds(value), "\(name): drain_timeout \(value)"))
            }
        }
        #expect(stop > longestDrain, "TimeoutStopSec=\(raw) must exceed drain_timeout \(longestDrain)s")
    }

    /// "30s", "1min", "2m", "90": seconds (enough of systemd.time(7) for this unit and the configs).
    func seconds(_ text: String) -> Double? {
        let units: [(String, Double)] = [("min", 60), ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * factor }
        }
        return Double(text)
    }
}
