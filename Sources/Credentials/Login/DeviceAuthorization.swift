/// The device authorization endpoint's answer (RFC 8628 §3.2): what the person is shown and what the
/// proxy polls with.
struct DeviceAuthorization {
    let deviceCode: String
    let userCode: String
    let verificationURI: String
    let verificationURIComplete: String?
    /// Seconds between polls (RFC 8628 §3.2: 5 when absent).
    let interval: Double
    /// The codes' lifetime in seconds, as the answer gave it.
    let lifetime: Double?

    /// nil when a required member is missing. `verification_url` is the name some providers used
    /// before the RFC.
    init?(_ answer: JSONValue) {
        guard let deviceCode = answer["device_code"]?.string, !deviceCode.isEmpty,
            let userCode = answer["user_code"]?.string, !userCode.isEmpty,
            let verificationURI = answer["verification_uri"]?.string ?? answer["verification_url"]?.string
        else { return nil }
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationURI = verificationURI
        verificationURIComplete = answer["verification_uri_complete"]?.string.flatMap { $0.isEmpty ? nil : $0 }
        interval = max(1, answer["interval"]?.number ?? 5)
        lifetime = answer["expires_in"]?.number
    }

    var message: String {
        var message = "To sign in, open \(verificationURI) and enter the code \(userCode)"
        if let complete = verificationURIComplete { message += "\n(or open \(complete))" }
        return message
    }
}
