/// A small XML reader for STS's query-protocol answers (AssumeRole, AssumeRoleWithWebIdentity and
/// their `<ErrorResponse>`), in place of XMLCoder: that pulled in Foundation's XML module, and with it
/// libxml2 and Debian's ICU (38 MB of the image; bench/RESULTS.md, "Idle memory in the image").
///
/// It reads elements, text, the five predefined entities and numeric character references,
/// comments, the `<?xml …?>` declaration and CDATA sections; attributes are skipped (STS's only one is
/// `xmlns`) and a namespace prefix is dropped from names. A document type declaration is refused
/// (STS sends none, and refusing it leaves no entity expansion to guard), as is anything malformed.
struct STSXMLElement: Equatable {
    /// The local name: `a:Code` is `Code`.
    var name: String
    var children: [STSXMLElement] = []
    /// The element's own text (its children's text not included), entities decoded.
    var text: String = ""

    /// The first child called `name`.
    func child(_ name: String) -> STSXMLElement? { children.first { $0.name == name } }

    /// The text of the first child called `name`, without surrounding white space.
    func value(_ name: String) -> String? {
        guard let scalars = child(name)?.text.unicodeScalars else { return nil }
        guard let first = scalars.firstIndex(where: { !isSpace($0) }), let last = scalars.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(scalars[first...last])
    }

    /// Parses a whole document; nil when it is not well formed as far as this reader checks.
    static func parse(_ bytes: [UInt8]) -> STSXMLElement? {
        var reader = STSXMLReader(bytes: bytes)
        return reader.document()
    }
}

private func isSpace(_ scalar: Unicode.Scalar) -> Bool { scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" }

private struct STSXMLReader {
    let bytes: [UInt8]
    var index = 0
    /// Deeper documents are refused: STS's answers are four levels deep.
    static let maximumDepth = 64

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func document() -> STSXMLElement? {
        var stack: [STSXMLElement] = []
        var root: STSXMLElement?
        while index < bytes.count {
            if bytes[index] != UInt8(ascii: "<") {
                let end = bytes[index...].firstIndex(of: UInt8(ascii: "<")) ?? bytes.count
                let raw = bytes[index..<end]
                index = end
                if stack.isEmpty {
                    // Only white space outside the root element.
                    guard raw.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) else { return nil }
                    continue
                }
                guard let text = Self.decodeEntities(raw) else { return nil }
                stack[stack.count - 1].text += text
            } else if starts(with: "<?") {
                guard skip(past: "?>") else { return nil }
            } else if starts(with: "<!--") {
                guard skip(past: "-->") else { return nil }
            } else if starts(with: "<![CDATA[") {
                guard !stack.isEmpty else { return nil }
                let start = index + 9
                guard skip(past: "]]>") else { return nil }
                stack[stack.count - 1].text += String(decoding: bytes[start..<(index - 3)], as: UTF8.self)
            } else if starts(with: "<!") {
                return nil  // <!DOCTYPE …>: see the type's comment
            } else if starts(with: "</") {
                index += 2
                guard let name = readName(), let open = stack.popLast(), open.name == name.local, !name.qualified.isEmpty else { return nil }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ">") else { return nil }
                index += 1
                if stack.isEmpty {
                    guard root == nil else { return nil }
                    root = open
                } else {
                    stack[stack.count - 1].children.append(open)
                }
            } else {
                index += 1
                guard root == nil, stack.count < Self.maximumDepth, let name = readName() else { return nil }
                guard let selfClosing = skipAttributes() else { return nil }
                let element = STSXMLElement(name: name.local)
                if !selfClosing {
                    stack.append(element)
                } else if stack.isEmpty {
                    root = element
                } else {
                    stack[stack.count - 1].children.append(element)
                }
            }
        }
        return stack.isEmpty ? root : nil
    }

    func starts(with prefix: StaticString) -> Bool {
        let count = prefix.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        return (0..<count).allSatisfy { bytes[index + $0] == prefix.utf8Start[$0] }
    }

    /// Moves past the next `terminator`; false when there is none.
    mutating func skip(past terminator: StaticString) -> Bool {
        while index < bytes.count {
            if starts(with: terminator) {
                index += terminator.utf8CodeUnitCount
                return true
            }
            index += 1
        }
        return false
    }

    mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    /// A tag's name up to white space, `/` or `>`: the whole, and the part after any prefix.
    mutating func readName() -> (qualified: String, local: String)? {
        let start = index
        while index < bytes.count, ![0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: "/"), UInt8(ascii: ">")].contains(bytes[index]) { index += 1 }
        guard index > start, index < bytes.count else { return nil }
        let qualified = String(decoding: bytes[start..<index], as: UTF8.self)
        let local = qualified.split(separator: ":", omittingEmptySubsequences: false).last.map(String.init) ?? qualified
        return local.isEmpty ? nil : (qualified, local)
    }

    /// Skips `name="value"` pairs to the end of a start tag: true when it ended in `/>`, nil when it
    /// never ended.
    mutating func skipAttributes() -> Bool? {
        var quote: UInt8?
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if let open = quote {
                if byte == open { quote = nil }
            } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                quote = byte
            } else if byte == UInt8(ascii: ">") {
                return index >= 2 && bytes[index - 2] == UInt8(ascii: "/")
            }
        }
        return nil
    }

    /// Text with `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&#NN;` and `&#xHH;` replaced; nil for
    /// any other reference, a bare `&` or a number that is no Unicode scalar.
    static func decodeEntities(_ raw: ArraySlice<UInt8>) -> String? {
        guard raw.contains(UInt8(ascii: "&")) else { return String(decoding: raw, as: UTF8.self) }
        var out = ""
        var rest = raw[...]
        while let amp = rest.firstIndex(of: UInt8(ascii: "&")) {
            out += String(decoding: rest[rest.startIndex..<amp], as: UTF8.self)
            guard let semicolon = rest[amp...].firstIndex(of: UInt8(ascii: ";")), semicolon - amp <= 12 else { return nil }
            let name = String(decoding: rest[(amp + 1)..<semicolon], as: UTF8.self)
            switch name {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                let number: UInt32?
                if name.contains("+") || name.contains("-") {
                    number = nil  // UInt32("+5") would take the sign
                } else if name.hasPrefix("#x") {
                    number = UInt32(name.dropFirst(2), radix: 16)
                } else if name.hasPrefix("#") {
                    number = UInt32(name.dropFirst(1), radix: 10)
                } else {
                    number = nil
                }
                guard let number, number != 0, let scalar = Unicode.Scalar(number) else { return nil }
                out.unicodeScalars.append(scalar)
            }
            rest = rest[(semicolon + 1)...]
        }
        return out + String(decoding: rest, as: UTF8.self)
    }
}
