import Basics

/// Removes `.` and `..` segments from an absolute path (RFC 3986 §5.2.4).
///
/// Returns nil when the path does not start with `/` or would climb above it (`/../x`). Percent-encoded
/// dots (`%2e`, `%2E`) count as dots when recognising `.` and `..`, so `/%2e%2e/secret` cannot slip past a
/// path allow-list; every other byte is kept as it came (nothing is decoded).
///
/// Also nil for a `..` that an encoded slash or a backslash sets apart inside a segment (`/v1/..%2Fadmin`):
/// RFC 3986 calls `%2F` data, but servers such as nginx decode it before they resolve dot-segments, so
/// the upstream would climb out of its base path (docs/ROUTES.md, "Paths").
public func removeDotSegments(_ path: String) -> String? {
    let bytes = path.utf8
    guard bytes.first == UInt8(ascii: "/") else { return nil }
    // Most paths hold neither a dot nor a percent sign: nothing to do, nothing to allocate. (Read
    // through `withUTF8`: iterating the UTF8View costs about forty instructions a byte.)
    var copy = path
    let plain = copy.withUTF8 { raw in !raw.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "%") } }
    if plain { return path }
    let segments = bytes.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
    var output: [Substring.UTF8View] = []
    output.reserveCapacity(segments.count)
    var changed = false
    for (index, segment) in segments.enumerated() {
        let isLast = index == segments.count - 1
        if hidesDotDot(segment) { return nil }
        switch dotCount(segment) {
        case 1:
            changed = true
            // "/a/." → "/a/": a dot segment at the end leaves the trailing slash.
            if isLast { output.append(bytes[bytes.endIndex...]) }
        case 2:
            changed = true
            guard !output.isEmpty else { return nil }
            output.removeLast()
            if isLast { output.append(bytes[bytes.endIndex...]) }
        default:
            output.append(segment)
        }
    }
    guard changed else { return path }
    var result: [UInt8] = []
    result.reserveCapacity(bytes.count)
    for segment in output {
        result.append(UInt8(ascii: "/"))
        result.append(contentsOf: segment)
    }
    if result.isEmpty { result.append(UInt8(ascii: "/")) }
    return String(decoding: result, as: UTF8.self)
}

/// 1 for `.`, 2 for `..` (either dot possibly written `%2e`), else 0.
private func dotCount(_ segment: Substring.UTF8View.SubSequence) -> Int {
    var count = 0
    var i = segment.startIndex
    while i < segment.endIndex {
        let b = segment[i]
        if b == UInt8(ascii: ".") {
            i = segment.index(after: i)
        } else if b == UInt8(ascii: "%") {
            let one = segment.index(after: i)
            guard one < segment.endIndex, segment[one] == UInt8(ascii: "2") else { return 0 }
            let two = segment.index(after: one)
            guard two < segment.endIndex, asciiLower(segment[two]) == UInt8(ascii: "e") else { return 0 }
            i = segment.index(after: two)
        } else {
            return 0
        }
        count += 1
        if count > 2 { return 0 }
    }
    return count
}

/// Whether `segment` holds a `..` (dots maybe written `%2e`) between encoded slashes (`%2F`, `%5C`) or
/// backslashes, which a server that decodes them first would take for a dot-segment.
private func hidesDotDot(_ segment: Substring.UTF8View.SubSequence) -> Bool {
    var pieceStart = segment.startIndex
    var i = segment.startIndex
    var sawSeparator = false
    while i < segment.endIndex {
        var separatorEnd: Substring.UTF8View.Index?
        if segment[i] == UInt8(ascii: "\\") {
            separatorEnd = segment.index(after: i)
        } else if segment[i] == UInt8(ascii: "%") {
            let one = segment.index(after: i)
            if one < segment.endIndex {
                let two = segment.index(after: one)
                if two < segment.endIndex {
                    let hi = segment[one]
                    let lo = asciiLower(segment[two])
                    if (hi == UInt8(ascii: "2") && lo == UInt8(ascii: "f")) || (hi == UInt8(ascii: "5") && lo == UInt8(ascii: "c")) {
                        separatorEnd = segment.index(after: two)
                    }
                }
            }
        }
        if let end = separatorEnd {
            if dotCount(segment[pieceStart..<i]) == 2 { return true }
            sawSeparator = true
            pieceStart = end
            i = end
        } else {
            i = segment.index(after: i)
        }
    }
    return sawSeparator && dotCount(segment[pieceStart..<segment.endIndex]) == 2
}
