import FoundationEssentials

/// A placeholder's shape for `tokenproxy placeholder --shape` (CONTRACT.md "Programs in a
/// sandbox"): fixed text around exactly one `{random:N}`, which stands for N characters of
/// `[A-Za-z0-9]`, so that an SDK checking a key's prefix or length (`sk-ant-api03-`, `ghp_`,
/// `AKIA`) takes the placeholder.
public struct PlaceholderShape: Equatable, Sendable {
    public var prefix: String
    public var randomCount: Int
    public var suffix: String

    /// The characters `{random:N}` is made of.
    public static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)

    /// The shape of `text`, or why it is refused: no `{random:N}` or more than one, N below
    /// `PlaceholderConfiguration.minimumLength` (a shorter random part is guessable), or a character
    /// outside visible ASCII (a placeholder goes in a header field or a query).
    public static func parse(_ text: String) -> Result<PlaceholderShape, ShapeError> {
        if let bad = text.unicodeScalars.first(where: { $0.value <= 0x20 || $0.value >= 0x7F }) {
            let what = bad.value == 0x20 || bad.value == 0x09 ? "white space" : "a character outside visible ASCII"
            return .failure(ShapeError("the shape holds \(what); a placeholder must fit in a header field"))
        }
        let marks = text.components(separatedBy: "{random:")
        guard marks.count == 2 else {
            return .failure(ShapeError(marks.count < 2 ? "the shape needs one {random:N}" : "the shape may hold only one {random:N}"))
        }
        guard let close = marks[1].firstIndex(of: "}"), let count = Int(marks[1][..<close]) else {
            return .failure(ShapeError("{random:N} needs a whole number N and a closing }"))
        }
        let minimum = PlaceholderConfiguration.minimumLength
        guard count >= minimum else { return .failure(ShapeError("{random:\(count)}: N must be at least \(minimum)")) }
        guard count <= 4096 else { return .failure(ShapeError("{random:\(count)}: N must be at most 4096")) }
        return .success(PlaceholderShape(prefix: marks[0], randomCount: count, suffix: String(marks[1][marks[1].index(after: close)...])))
    }

    /// A fresh value of the shape, each random character drawn uniformly from `alphabet` by `generator`.
    public func make<Generator: RandomNumberGenerator>(using generator: inout Generator) -> String {
        let random = (0..<randomCount).map { _ in Self.alphabet.randomElement(using: &generator)! }
        return prefix + String(decoding: random, as: UTF8.self) + suffix
    }

    public struct ShapeError: Error, Equatable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}
