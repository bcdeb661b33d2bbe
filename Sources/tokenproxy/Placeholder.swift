import ArgumentParser
import Config
import Foundation

/// `tokenproxy placeholder --shape SHAPE` (CONTRACT.md "Programs in a sandbox"): a fresh random
/// placeholder of that shape on stdout. The random characters come from the system's CSPRNG
/// (`SystemRandomNumberGenerator`: getrandom on Linux).
struct Placeholder: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "placeholder",
        abstract: "Print a fresh random placeholder of a shape, e.g. --shape 'sk-ant-api03-{random:64}'.")
    @Option(name: .long, help: "Fixed text around one {random:N}: N (at least 22) characters of [A-Za-z0-9].")
    var shape: String

    func run() throws {
        switch PlaceholderShape.parse(shape) {
        case .failure(let error):
            fail("placeholder: \(error)", status: Exit.badConfiguration)
        case .success(let parsed):
            var generator = SystemRandomNumberGenerator()
            FileHandle.standardOutput.write(Data((parsed.make(using: &generator) + "\n").utf8))
        }
    }
}
