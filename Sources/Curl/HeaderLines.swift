/// The header lines of one request made with libcurl's HTTP (`CurlEasy.setHeaders`), as libcurl wants
/// them ("Name: value", "Name;" for an empty value, "Name:" to stop libcurl adding its own), built
/// without a String per line: every line is NUL-terminated in one byte buffer that its owner reuses
/// from request to request.
package struct HeaderLines {
    /// The lines, each followed by a NUL.
    package private(set) var bytes: [UInt8] = []
    /// The index of each line's NUL in `bytes`.
    package private(set) var ends: [Int] = []

    package init() {}

    package var count: Int { ends.count }

    /// Empties the list, keeping its memory.
    package mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
    }

    /// `Name: value`, or `Name;` when the value is empty (libcurl reads `Name:` as "remove").
    package mutating func append(name: String, value: String) {
        bytes.append(contentsOf: name.utf8)
        if value.isEmpty {
            bytes.append(UInt8(ascii: ";"))
        } else {
            bytes.append(UInt8(ascii: ":"))
            bytes.append(UInt8(ascii: " "))
            bytes.append(contentsOf: value.utf8)
        }
        end()
    }

    /// `Name: value` with the value given as bytes (not empty).
    package mutating func append(name: StaticString, value: [UInt8]) {
        appendStatic(name)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: value)
        end()
    }

    /// `Name: value` for a fixed name.
    package mutating func append(name: StaticString, value: String) {
        appendStatic(name)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: value.utf8)
        end()
    }

    /// A whole line as written ("Name: value"), for callers off the hot path.
    package mutating func append(line: String) {
        bytes.append(contentsOf: line.utf8)
        end()
    }

    /// `Name:`: libcurl sends no such header, not even its own default.
    package mutating func appendRemoval(_ name: StaticString) {
        appendStatic(name)
        bytes.append(UInt8(ascii: ":"))
        end()
    }

    /// The lines as Strings (for tests and logs; not the hot path).
    package var lines: [String] {
        var out: [String] = []
        var start = 0
        for e in ends {
            out.append(String(decoding: bytes[start..<e], as: UTF8.self))
            start = e + 1
        }
        return out
    }

    private mutating func appendStatic(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    private mutating func end() {
        ends.append(bytes.count)
        bytes.append(0)
    }
}
