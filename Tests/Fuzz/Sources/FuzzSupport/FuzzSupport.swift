import CFuzzer
import Glibc
import HTTP1

@testable import IdentityHTTP

// What the fuzz targets share: the request parser driven as a connection drives it, with its
// promises checked on every call, and deterministic split points.

/// A request parser event with body ranges turned into bytes; consecutive body events are merged.
public enum Event: Equatable {
    case head(RequestHead)
    case body([UInt8])
    case end
    case error(RequestParseError)
}

/// Feeds `pieces` to one parser in order, as a connection would, and collects its events; stops at
/// the first error. `inspect` sees every head.
public func parseRequests(_ pieces: [ArraySlice<UInt8>], limits: ParserLimits) -> [Event] {
    var parser = RequestParser(limits: limits)
    var events: [Event] = []
    for piece in pieces {
        let failed: Bool = Array(piece).withUnsafeBytes { buffer in
            var offset = 0
            while true {
                let rest = UnsafeRawBufferPointer(rebasing: buffer[offset...])
                let (consumed, event) = parser.parse(rest)
                precondition(consumed >= 0 && consumed <= rest.count, "consumed out of bounds")
                switch event {
                case .head(let head)?:
                    events.append(.head(head))
                    inspect(head)
                case .body(let range)?:
                    precondition(range.lowerBound >= 0 && range.upperBound <= consumed, "body range beyond the consumed prefix")
                    let bytes = Array(rest[range])
                    if case .body(let previous)? = events.last {
                        events[events.count - 1] = .body(previous + bytes)
                    } else {
                        events.append(.body(bytes))
                    }
                case .end?:
                    events.append(.end)
                case .error(let error)?:
                    events.append(.error(error))
                    return true
                case nil:
                    precondition(consumed > 0 || offset + consumed == buffer.count, "no progress without an event")
                }
                offset += consumed
                if event == nil && offset == buffer.count { return false }
            }
        }
        if failed { break }
    }
    return events
}

/// What the proxy derives from a head: none of it may trap, whatever the head holds.
public func inspect(_ head: RequestHead) {
    precondition(!head.method.isEmpty, "empty method")
    _ = head.first("host")
    // Each field goes upstream as "name: value" byte for byte (FieldBlock.copyField), obs-text included.
    let out = ByteBuffer()
    for i in 0..<head.fields.count {
        out.removeAll()
        head.fields.copyField(i, to: out)
        let copied = out.bytes
        let field = head.fields.field(i)
        let expected = Array(field.name.utf8) + Array(": ".utf8) + (field.rawValue ?? Array(field.value.utf8)) + Array("\r\n".utf8)
        precondition(copied == expected, "a copied field differs from its name and value")
        _ = head.isHopByHop(i)
    }
    if case .origin(let path, _)? = RequestTarget.parse(head.target) {
        if let cleaned = removeDotSegments(path) {
            precondition(cleaned.utf8.first == UInt8(ascii: "/"), "a cleaned path must start with /")
        }
    }
    if case .contentLength(let length) = head.framing {
        precondition(length >= 0, "negative Content-Length")
    }
}

/// Deterministic pieces of 1...17 bytes, from an xorshift generator seeded by `seed`.
public func pieces(of bytes: ArraySlice<UInt8>, seed: UInt8) -> [ArraySlice<UInt8>] {
    var state = UInt32(seed) &* 2_654_435_761 | 1
    var result: [ArraySlice<UInt8>] = []
    var start = bytes.startIndex
    while start < bytes.endIndex {
        state ^= state << 13
        state ^= state >> 17
        state ^= state << 5
        let length = Int(state % 17) + 1
        let end = min(start + length, bytes.endIndex)
        result.append(bytes[start..<end])
        start = end
    }
    return result
}

/// The statuses an identity provider's answer is tried with.
let answerStatuses = [200, 201, 204, 400, 401, 403, 404, 409, 429, 500, 503, 302]

/// An identity provider's answer built from fuzz input: byte 0 picks the status, byte 1 how many
/// `name: value` lines follow (0 to 3, each ended by LF; `date`, `content-type` and
/// `x-amzn-errortype` are the ones read), the rest is the body.
public func answer(from input: ArraySlice<UInt8>) -> HTTPCallResponse {
    var rest = input
    let status = rest.first.map { answerStatuses[Int($0) % answerStatuses.count] } ?? 200
    rest = rest.dropFirst()
    let lineCount = rest.first.map { Int($0) % 4 } ?? 0
    rest = rest.dropFirst()
    var headers: [(name: String, value: String)] = []
    for _ in 0..<lineCount {
        guard let lf = rest.firstIndex(of: 0x0A) else { break }
        let line = String(decoding: rest[..<lf], as: UTF8.self)
        rest = rest[(lf + 1)...]
        let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let name = parts[0].lowercased()
        let value = parts.count > 1 ? parts[1].drop { $0 == " " } : ""
        headers.append((name: name, value: String(value)))
    }
    return HTTPCallResponse(status: status, headers: headers, body: Array(rest))
}

/// Hands the process to libFuzzer's driver, which parses the command line (corpus folders, `-runs=`,
/// a crash file to replay) and calls `testOneInput` for each input.
///
/// SwiftPM links an executable with its `main.swift` as the entry point (it renames `main`), so
/// libFuzzer's own `main` cannot be used; each target's top-level code calls this instead.
public func runFuzzer(_ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Never {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
}
