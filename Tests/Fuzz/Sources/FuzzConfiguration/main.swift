import Config
import Foundation
import FuzzSupport

// libFuzzer target: configuration loading (CONTRACT.md, "The configuration file"): YAML through
// Yams, the typed readers, units, secrets from the environment and from files, relative paths,
// validation, and what `tokenproxy check` prints. The input is the file's text. Loading either
// succeeds or throws a `ConfigurationError` naming a reason; nothing may trap, and the printed
// description never shows a secret.

/// What every run shares.
enum Fixed {
    static let secretValue = "fuzz-secret-value"

    /// A folder with a secret file and a store folder, so that `*_file` keys and relative paths resolve.
    static let baseDirectory: String = {
        let folder = NSTemporaryDirectory() + "/tokenproxy-fuzz-config-\(getpid())"
        try? FileManager.default.createDirectory(atPath: folder + "/state", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: folder + "/secret", contents: Data((secretValue + "\n").utf8))
        return folder
    }()

    static let environment = [
        "SECRET": secretValue,
        "CLIENT_SECRET": secretValue,
        "EMPTY": "",
    ]
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let yaml = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    do {
        let loaded = try ConfigurationLoader.parse(yaml: yaml, baseDirectory: Fixed.baseDirectory, environment: Fixed.environment)
        let description = loaded.configuration.resolvedDescription()
        // A secret the file names (`*_env`, `*_file`) is masked; the file may of course spell it itself.
        precondition(yaml.contains(Fixed.secretValue) || !description.contains(Fixed.secretValue), "check would print a secret")
    } catch let error as ConfigurationError {
        _ = "\(error)"
    } catch {
        preconditionFailure("loading threw something other than a ConfigurationError: \(error)")
    }
    return 0
}

runFuzzer(fuzzOneInput)
