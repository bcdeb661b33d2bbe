import Credentials
import Foundation
import HTTP1

/// The values a route sent upstream as its credential, as an answer could carry them back
/// (CONTRACT.md "Programs in a sandbox", "Scrubbing"): the token; for Basic also the base64 of
/// `user:token`; with `inject.query` the token percent-encoded as well; a DPoP-bound token is the
/// token; for SigV4 the secret access key and the session token (the token itself is then their
/// JSON, which no upstream saw). Immutable, made once per token (`RouteScrubbing`).
final class ScrubPatterns {
    /// Distinct, none empty, longest first: at one position the longest value wins.
    let values: [[UInt8]]
    /// The longest value's length: a scrubber holds back at most one less between reads.
    let longest: Int
    /// `startsValue[b]`: some value begins with byte `b` (the scan's one test per byte).
    let startsValue: [Bool]

    init(_ values: [String]) {
        var distinct: [[UInt8]] = []
        for value in values where !value.isEmpty {
            let bytes = Array(value.utf8)
            if !distinct.contains(bytes) { distinct.append(bytes) }
        }
        distinct.sort { $0.count > $1.count }
        self.values = distinct
        longest = distinct.first?.count ?? 0
        var starts = [Bool](repeating: false, count: 256)
        for value in distinct { starts[Int(value[0])] = true }
        startsValue = starts
    }

    /// The spellings of `token` that `placement` sends upstream.
    static func values(of token: TokenSnapshot, placement: CredentialPlacement) -> [String] {
        switch placement {
        case .signed:
            guard let keys = token.aws?.credentials else { return [] }
            return [keys.secretAccessKey] + (keys.sessionToken.map { [$0] } ?? [])
        case .authorization:
            return [token.accessToken]
        case .field(let field):
            guard case .basic(let username) = field.value, token.dpop == nil else { return [token.accessToken] }
            return [token.accessToken, Data((username + ":" + token.accessToken).utf8).base64EncodedString()]
        case .query(let parameter):
            return token.dpop == nil ? parameter.spellings(of: token) : [token.accessToken]
        }
    }

    /// Replaces each value found in `bytes` from `start` by as many `*`: at each position the
    /// longest value that matches there, then the scan goes on after it. Unless `final`, it stops
    /// at the first position where a value may begin but the bytes end first (`holdFrom`): those
    /// bytes wait for the next read.
    func replace(in bytes: UnsafeMutableRawBufferPointer, from start: Int, final: Bool) -> (holdFrom: Int, count: Int) {
        var count = 0
        var i = start
        let n = bytes.count
        while i < n {
            if !startsValue[Int(bytes[i])] {
                i += 1
                continue
            }
            var matched = 0
            var mayBegin = false
            for value in values {
                let left = n - i
                if left >= value.count {
                    if matched == 0 && Self.equal(bytes, at: i, value, count: value.count) { matched = value.count }
                } else if !final && Self.equal(bytes, at: i, value, count: left) {
                    mayBegin = true
                    break
                }
            }
            if mayBegin { return (i, count) }
            if matched > 0 {
                for j in i..<(i + matched) { bytes[j] = UInt8(ascii: "*") }
                count += 1
                i += matched
            } else {
                i += 1
            }
        }
        return (n, count)
    }

    /// Whether `bytes` hold a value, or end where one may begin: only then is a read copied.
    func touches(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let n = bytes.count
        for i in 0..<n where startsValue[Int(bytes[i])] {
            for value in values {
                let k = min(n - i, value.count)
                if value.withUnsafeBytes({ memcmp(bytes.baseAddress! + i, $0.baseAddress!, k) }) == 0 { return true }
            }
        }
        return false
    }

    private static func equal(_ bytes: UnsafeMutableRawBufferPointer, at offset: Int, _ value: [UInt8], count: Int) -> Bool {
        value.withUnsafeBytes { memcmp(bytes.baseAddress! + offset, $0.baseAddress!, count) == 0 }
    }
}

/// One answer's scrubber: its head in place, its body as it streams (a value split across reads is
/// found: the bytes where one may begin wait for the next read, at most `longest - 1` of them, and
/// go at the body's end). The decoded body is scrubbed, so chunked framing is made again around
/// what comes out, and a chunk-size line never meets a value.
final class ResponseScrubber {
    let patterns: ScrubPatterns
    /// Replacements so far, in the head and the body (the audit line's `scrubbed`).
    private(set) var count = 0
    /// The bytes held back from the last read, and the read joined to them.
    private var held: [UInt8] = []
    private var work: [UInt8] = []

    init(_ patterns: ScrubPatterns) { self.patterns = patterns }

    /// Bytes `start..<count` of `buffer` (a response head as written) scrubbed in place; answers
    /// how many values were replaced.
    @discardableResult
    func scrubHead(_ buffer: ByteBuffer, from start: Int) -> Int {
        let n = buffer.withUnsafeMutableBytes(from: start) { patterns.replace(in: $0, from: 0, final: true).count }
        count += n
        return n
    }

    /// The body's next bytes: `emit` gets what may go now (nothing, or one run of bytes); answers
    /// how many values were replaced.
    @discardableResult
    func scrub(_ input: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) -> Int {
        guard input.count > 0 else { return 0 }
        // The usual read: no value in it and none begun at its end; it goes as it came, uncopied.
        if held.isEmpty && !patterns.touches(input) {
            emit(input)
            return 0
        }
        work.removeAll(keepingCapacity: true)
        work.append(contentsOf: held)
        work.append(contentsOf: input)
        held.removeAll(keepingCapacity: true)
        return scrubWork(final: false, emit: emit)
    }

    /// The body's end: the bytes held back, scrubbed with nothing more to come.
    @discardableResult
    func finish(emit: (UnsafeRawBufferPointer) -> Void) -> Int {
        guard !held.isEmpty else { return 0 }
        swap(&work, &held)
        held.removeAll(keepingCapacity: true)
        return scrubWork(final: true, emit: emit)
    }

    private func scrubWork(final: Bool, emit: (UnsafeRawBufferPointer) -> Void) -> Int {
        let (holdFrom, n) = work.withUnsafeMutableBytes { patterns.replace(in: $0, from: 0, final: final) }
        count += n
        if holdFrom < work.count { held.append(contentsOf: work[holdFrom...]) }
        if holdFrom > 0 { work.withUnsafeBytes { emit(UnsafeRawBufferPointer(rebasing: $0[0..<holdFrom])) } }
        return n
    }

    /// CONTRACT.md "Scrubbing": an answer in another encoding than `identity` cannot be scrubbed and
    /// is refused (fail closed); nil when it may go.
    static func refusal(_ head: ResponseHead) -> String? {
        for i in 0..<head.fields.count where head.fields.nameEquals(i, "content-encoding") {
            for coding in head.fields.value(i).split(separator: ",") {
                let name = coding.trimmingCharacters(in: .whitespaces).lowercased()
                if !name.isEmpty && name != "identity" {
                    return "the upstream answered in a Content-Encoding other than identity, which a route that scrubs cannot read"
                }
            }
        }
        return nil
    }
}

/// A route's scrubbing as one loop serves it (`scrub: true`): the patterns of the last token,
/// made again when the token changes, so a request makes only its scrubber.
final class RouteScrubbing {
    let placement: CredentialPlacement
    private var lastToken: TokenSnapshot?
    private var lastPatterns: ScrubPatterns?

    init(placement: CredentialPlacement) { self.placement = placement }

    /// The scrubber of an answer to a request sent with `token`; nil when nothing went (the
    /// client's own credential, `client_authorization: keep`).
    func scrubber(for token: TokenSnapshot?) -> ResponseScrubber? {
        guard let token else { return nil }
        if token !== lastToken || lastPatterns == nil {
            lastToken = token
            lastPatterns = ScrubPatterns(ScrubPatterns.values(of: token, placement: placement))
        }
        guard let patterns = lastPatterns, patterns.longest > 0 else { return nil }
        return ResponseScrubber(patterns)
    }
}
