import ArgumentParser
import Foundation
import TLS

/// `tokenproxy ca` (CONTRACT.md "HTTPS for clients"): the forward proxy's CA certificate on stdout,
/// the CA made first when neither of its files exists. Its key never leaves its file.
struct CA: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "Print the certificate (PEM) of the CA that forward_proxy signs host certificates with, making it when it does not exist yet.")
    @OptionGroup var options: ConfigOption

    func run() throws {
        let loaded = options.load()
        guard let forward = loaded.configuration.forwardProxy else {
            fail("ca: the configuration has no forward_proxy section, so there is no CA", status: Exit.badConfiguration)
        }
        do {
            let authority = try ForwardProxyAuthority.prepare(certificateFile: forward.caCertFile, keyFile: forward.caKeyFile)
            FileHandle.standardOutput.write(Data(authority.certificatePEM))
        } catch {
            fail("ca: \(error)", status: Exit.runtimeFailure)
        }
    }
}
