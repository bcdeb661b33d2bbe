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
    /// `startsValue[b]`: some value begins with byte `b`.
    let startsValue: [Bool]
    /// The values one after the other in memory of their own (`offsets`, `lengths`), so the scan
    /// compares with `memcmp` and touches no array of arrays per candidate.
    private let storage: UnsafeMutableRawPointer
    private let offsets: [Int]
    private let lengths: [Int]
    /// The one byte every value begins with, when they share it (one token: the usual case): the
    /// scan then jumps from one to the next with `memchr`.
    private let onlyFirstByte: Int32?
    /// With one value: the offset of its least common byte (`anchorOffset`, by `commonness`), which
    /// `touches` looks for instead of the first: text is mostly letters and digits, and a token's
    /// `-`, `_` or `.` rarely occurs in it, so most reads are passed by one `memchr`.
    private let anchorOffset: Int
    private let anchorByte: Int32

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
        let firsts = Set(distinct.map { $0[0] })
        onlyFirstByte = firsts.count == 1 ? Int32(firsts.first!) : nil
        let storage = UnsafeMutableRawPointer.allocate(byteCount: max(distinct.reduce(0) { $0 + $1.count }, 1), alignment: 1)
        var offsets: [Int] = []
        var at = 0
        for value in distinct {
            value.withUnsafeBytes { (storage + at).copyMemory(from: $0.baseAddress!, byteCount: value.count) }
            offsets.append(at)
            at += value.count
        }
        self.storage = storage
        let only = distinct.count == 1 ? distinct[0] : []
        anchorOffset = only.indices.min { Self.commonness(only[$0]) < Self.commonness(only[$1]) } ?? 0
        anchorByte = only.isEmpty ? 0 : Int32(only[anchorOffset])
        self.offsets = offsets
        lengths = distinct.map(\.count)
    }

    deinit { storage.deallocate() }

    /// How often a byte occurs in text, roughly: lowercase letters, space and JSON's punctuation most,
    /// then digits, then uppercase letters, then the rest.
    private static func commonness(_ byte: UInt8) -> Int {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: " "), UInt8(ascii: "\""), UInt8(ascii: ":"), UInt8(ascii: ","): return 3
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return 2
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return 1
        default: return 0
        }
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
        guard let base = bytes.baseAddress else { return (start, 0) }
        let n = bytes.count
        var count = 0
        var from = start
        if lengths.count == 1 {
            // One value: whole ones found by their anchor byte (`touches`); then only the last bytes.
            let length = lengths[0]
            var at = from + anchorOffset
            while at < n, let found = memchr(base + at, anchorByte, n - at) {
                let valueStart = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found)) - anchorOffset
                if valueStart + length <= n && memcmp(base + valueStart, storage, length) == 0 {
                    (base + valueStart).initializeMemory(as: UInt8.self, repeating: UInt8(ascii: "*"), count: length)
                    count += 1
                    from = valueStart + length
                    at = from + anchorOffset
                } else {
                    at = valueStart + anchorOffset + 1
                }
            }
            from = max(from, n - length + 1)
            if final { return (n, count) }
        }
        var i = nextStart(UnsafeRawPointer(base), from: from, to: n)
        while i < n {
            switch match(UnsafeRawPointer(base), at: i, to: n, final: final) {
            case .value(let length):
                (base + i).initializeMemory(as: UInt8.self, repeating: UInt8(ascii: "*"), count: length)
                count += 1
                i = nextStart(UnsafeRawPointer(base), from: i + length, to: n)
            case .mayBegin:
                return (i, count)
            case .none:
                i = nextStart(UnsafeRawPointer(base), from: i + 1, to: n)
            }
        }
        return (n, count)
    }

    /// Whether `bytes` hold a value, or end where one may begin: only then is a read copied.
    func touches(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        let n = bytes.count
        var i = 0
        if lengths.count == 1 {
            // One value: whole ones found by their anchor byte; then only the last bytes may begin one.
            let length = lengths[0]
            var at = anchorOffset
            while at < n, let found = memchr(base + at, anchorByte, n - at) {
                let start = base.distance(to: UnsafeRawPointer(found)) - anchorOffset
                if start + length <= n && memcmp(base + start, storage, length) == 0 { return true }
                at = start + anchorOffset + 1
            }
            i = max(0, n - length + 1)
        }
        i = nextStart(base, from: i, to: n)
        while i < n {
            if case .none = match(base, at: i, to: n, final: false) {
                i = nextStart(base, from: i + 1, to: n)
            } else {
                return true
            }
        }
        return false
    }

    private enum Match { case value(length: Int), mayBegin, none }

    /// What begins at `i` of the `n` bytes at `base`: the longest value there, or (unless `final`)
    /// the start of a value that the bytes end before.
    @inline(__always)
    private func match(_ base: UnsafeRawPointer, at i: Int, to n: Int, final: Bool) -> Match {
        let left = n - i
        var found = Match.none
        for v in 0..<lengths.count {
            let length = lengths[v]
            if left >= length {
                if case .none = found, memcmp(base + i, storage + offsets[v], length) == 0 { found = .value(length: length) }
            } else if !final && memcmp(base + i, storage + offsets[v], left) == 0 {
                return .mayBegin
            }
        }
        return found
    }

    /// The first position from `start` where a value's first byte is (`n`: none).
    @inline(__always)
    private func nextStart(_ base: UnsafeRawPointer, from start: Int, to n: Int) -> Int {
        guard start < n else { return n }
        if let byte = onlyFirstByte {
            guard let found = memchr(base + start, byte, n - start) else { return n }
            return base.distance(to: UnsafeRawPointer(found))
        }
        var i = start
        while i < n && !startsValue[Int(base.load(fromByteOffset: i, as: UInt8.self))] { i += 1 }
        return i
    }

}

/// An answer's scrubber: its head in place, its body as it streams (a value split across reads is
/// found: the bytes where one may begin wait for the next read, at most `longest - 1` of them, and
/// go at the body's end). The decoded body is scrubbed, so chunked framing is made again around
/// what comes out, and a chunk-size line never meets a value. A connection keeps one for its
/// answers one after the other (`UpstreamSide.answerScrubber`), `reset` for each: an answer costs
/// no allocation, and its buffers keep their room.
final class ResponseScrubber {
    private(set) var patterns: ScrubPatterns
    /// Replacements so far, in the head and the body (the audit line's `scrubbed`).
    private(set) var count = 0
    /// The bytes held back from the last read, and the read joined to them.
    private var held: [UInt8] = []
    private var work: [UInt8] = []

    init(_ patterns: ScrubPatterns) { self.patterns = patterns }

    /// Ready for a new answer, scrubbed for `patterns`: nothing held back, nothing counted.
    func reset(_ patterns: ScrubPatterns) {
        if patterns !== self.patterns { self.patterns = patterns }
        count = 0
        held.removeAll(keepingCapacity: true)
    }

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
/// made again when the token changes, so a request makes nothing.
final class RouteScrubbing {
    let placement: CredentialPlacement
    private var lastToken: TokenSnapshot?
    private var lastPatterns: ScrubPatterns?

    init(placement: CredentialPlacement) { self.placement = placement }

    /// What an answer to a request sent with `token` is scrubbed for; nil when nothing went (the
    /// client's own credential, `client_authorization: keep`).
    func patterns(for token: TokenSnapshot?) -> ScrubPatterns? {
        guard let token else { return nil }
        if token !== lastToken || lastPatterns == nil {
            lastToken = token
            lastPatterns = ScrubPatterns(ScrubPatterns.values(of: token, placement: placement))
        }
        guard let patterns = lastPatterns, patterns.longest > 0 else { return nil }
        return patterns
    }

    /// The scrubber of an answer to a request sent with `token`: `kept` reset, or a new one kept
    /// there (the first answer); nil when nothing went.
    func scrubber(for token: TokenSnapshot?, kept: inout ResponseScrubber?) -> ResponseScrubber? {
        guard let patterns = patterns(for: token) else { return nil }
        if let scrubber = kept {
            scrubber.reset(patterns)
            return scrubber
        }
        let scrubber = ResponseScrubber(patterns)
        kept = scrubber
        return scrubber
    }
}
