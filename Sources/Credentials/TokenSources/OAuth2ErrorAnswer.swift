/// What of an OAuth error answer (RFC 6749 §5.2) may be shown in a message.
enum OAuth2ErrorAnswer {
    /// An OAuth error code as RFC 6749 §5.2 allows it (%x20-21 / %x23-5B / %x5D-7E), short.
    static func errorCode(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= 64,
            text.utf8.allSatisfy({ ($0 >= 0x21 && $0 <= 0x7E) && $0 != 0x22 && $0 != 0x5C })
        else { return nil }
        return text
    }

    /// `error_description` when it can be shown: printable, short, nothing that was sent, no long word.
    static func safeDescription(_ text: String?, secrets: [String]) -> String? {
        guard let text else { return nil }
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty, trimmed.utf8.count <= 200 else { return nil }
        guard trimmed.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) else { return nil }
        for secret in secrets where secret.utf8.count >= 4 && trimmed.contains(secret) { return nil }
        for word in trimmed.split(separator: " ") where word.utf8.count > 40 { return nil }
        return trimmed
    }
}
