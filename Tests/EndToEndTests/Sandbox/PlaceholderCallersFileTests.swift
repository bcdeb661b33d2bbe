import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// CONTRACT.md "Programs in a sandbox", "Placeholders": a `callers_file` changed while four event
/// loops serve. The process reads each change once (one log line, not one per loop), and every loop
/// then refuses a removed caller and admits a new one.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(10))) struct PlaceholderCallersFileTests {
    @Test func everyLoopTakesTheChangeAndTheFileIsReadOncePerChange() throws {
        let agents = try ["one", "two", "three"].map { try PlaceholderTests.placeholder("ph-agent-\($0)-{random:40}") }
        let (first, second, third) = (agents[0], agents[1], agents[2])
        let folder = try TempDir(prefix: "callers-loops")
        let callers = try folder.write("callers.txt", "agent-1 \(first)\nagent-2 \(second)\n")
        let upstream = try PythonServer("echo_upstream")
        let settings = "inject: {header: x-api-key, format: \"{token}\"}\nplaceholder: {callers_file: \(callers)}"
        let proxy = try ProxyProcess(
            config: staticTokenConfig(upstream: upstream.baseURL, workers: 4, admin: true, logLevel: "debug", more: settings),
            environment: ["E2E_TOKEN": e2eToken])
        // curl opens a new connection each time: the kernel spreads them over the four loops' listeners.
        func status(_ placeholder: String) throws -> Int { try curl(["-H", "x-api-key: \(placeholder)", proxy.baseURL + "/v1/x"]).status }
        /// Whether `placeholder` gets `expected` on `run` requests in a row, within 30 s: a loop that
        /// kept the old callers would break every run that reaches it.
        func settles(_ placeholder: String, at expected: Int, run: Int = 24) throws -> Bool {
            let deadline = Date().addingTimeInterval(30)
            var inARow = 0
            while inARow < run && Date() < deadline {
                inARow = try status(placeholder) == expected ? inARow + 1 : 0
            }
            return inARow == run
        }
        func readAgainLines() -> Int { proxy.stderr.split(separator: "\n").filter { $0.contains("read again") }.count }
        /// A new file moved over the old one in one step (rename(2)), as an operator replaces it.
        func replaceCallers(_ text: String) throws {
            let new = try folder.write("callers.new", text)
            try #require(rename(new, callers) == 0, "rename: \(String(cString: strerror(errno)))")
        }
        #expect(try settles(second, at: 200, run: 8))

        try replaceCallers("agent-1 \(first)\n")
        #expect(try settles(second, at: 403), "a loop still lets agent-2 in")
        #expect(try status(first) == 200)
        #expect(proxy.waitForStderr(containing: "read again: 1 caller(s)"))
        #expect(readAgainLines() == 1, "\(proxy.stderr.suffix(3000))")

        try replaceCallers("agent-1 \(first)\nagent-3 \(third)\n")
        #expect(try settles(third, at: 200), "a loop still refuses agent-3")
        #expect(proxy.waitForStderr(containing: "read again: 2 caller(s)"))
        #expect(readAgainLines() == 2, "\(proxy.stderr.suffix(3000))")
        try PlaceholderTests.expectNoneLeaked([first, second, third, e2eToken], proxy: proxy)
        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }
}
