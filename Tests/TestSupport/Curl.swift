import Foundation

/// What the real `curl` binary saw.
public struct CurlResult: ReceivedResponse, Sendable {
    /// curl's exit code (0: a response arrived, whatever its status).
    public var exitCode: Int32
    /// The final response's status (0 when none arrived).
    public var status: Int
    /// The final response's header fields, in order.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// curl's own error message, if any.
    public var stderr: String
}

/// Runs `curl` with `arguments` (URL included), never following redirects and never using a proxy
/// from the environment, and returns the final response.
///
///     let r = try curl(["-X", "POST", "--data-binary", "@file", url])
///
/// `environment`: variables curl reads as a user's shell would hand them over (`HTTPS_PROXY`,
/// `CURL_CA_BUNDLE`); when it names a proxy, curl uses it.
public func curl(_ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 30) throws -> CurlResult {
    let dir = try TempDir(prefix: "curl")
    let headerFile = dir.file("headers")
    let bodyFile = dir.file("body")
    let base = [
        "--silent", "--show-error",
        "--max-time", String(Int(timeout.rounded(.up))),
        "--dump-header", headerFile, "--output", bodyFile,
        "--write-out", "%{http_code}",
    ]
    let proxied = environment.keys.contains { $0.lowercased().hasSuffix("_proxy") }
    let result = try runCommand(
        "curl",
        arguments: (proxied ? [] : ["--noproxy", "*"]) + base + arguments,
        environment: childEnvironment(environment),
        timeout: timeout + 10
    )
    let headerText = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
    // The dump holds every response (100 Continue, ...): keep the last block.
    let blocks = headerText.components(separatedBy: "\r\n\r\n").filter { !$0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }
    var headers: [(name: String, value: String)] = []
    if let last = blocks.last {
        for line in last.components(separatedBy: "\r\n").dropFirst() where !line.isEmpty {
            if let colon = line.firstIndex(of: ":") {
                headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
        }
    }
    let body = (try? Data(contentsOf: URL(fileURLWithPath: bodyFile))).map { [UInt8]($0) } ?? []
    return CurlResult(
        exitCode: result.status,
        status: Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0,
        headers: headers,
        body: body,
        stderr: result.stderr
    )
}
