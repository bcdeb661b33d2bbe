/// The header lines of one request made with libcurl's HTTP (`CurlEasy.setHeaders`), as libcurl wants
/// them ("Name: value", "Name;" for an empty value, "Name:" to stop libcurl adding its own), built
/// without a String per line: every line is NUL-terminated in one byte buffer, which `setHeaders`
/// copies into storage the easy handle owns and reuses (no malloc per line).
package struct HeaderLines {
    /// The lines, each followed by a NUL.
    private(set) var bytes: [UInt8] = []
    /// The index of each line's NUL in `bytes`.
    private(set) var ends: [Int] = []

    package init() {}

    var count: Int { ends.count }

    /// A whole line as written ("Name: value"), for callers off the hot path.
    package mutating func append(line: String) {
        bytes.append(contentsOf: line.utf8)
        end()
    }

    /// `Name:`: libcurl sends no such header, not even its own default.
    package mutating func appendRemoval(_ name: StaticString) {
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: ":"))
        end()
    }

    private mutating func end() {
        ends.append(bytes.count)
        bytes.append(0)
    }
}
