/// A fenced code block of a Markdown document: backtick fences at the start of a line.
public struct FencedBlock: Sendable {
    /// What follows the opening fence's backticks: `sh`, `yaml`, or nothing.
    public let language: String
    /// The opening fence's line, counted from 1.
    public let line: Int
    /// The lines between the fences, each ending in a newline.
    public let text: String
    /// The last line before the opening fence that is not blank (a marker comment, for example).
    public let lineBefore: String
}

/// Every fenced code block of `markdown`, in order; a block with no closing fence is left out.
public func fencedBlocks(in markdown: String) -> [FencedBlock] {
    var found: [FencedBlock] = []
    var open: (language: String, line: Int, text: String, lineBefore: String)?
    var previous = ""
    for (index, line) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
        if let block = open {
            if line.hasPrefix("```") {
                found.append(FencedBlock(language: block.language, line: block.line, text: block.text, lineBefore: block.lineBefore))
                open = nil
            } else {
                open?.text += line + "\n"
            }
        } else if line.hasPrefix("```") {
            open = (String(line.dropFirst(3)), index + 1, "", previous)
        }
        if !line.trimmingCharacters(in: .whitespaces).isEmpty { previous = String(line) }
    }
    return found
}
