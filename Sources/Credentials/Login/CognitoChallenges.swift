import Foundation

/// A challenge in a Cognito InitiateAuth or RespondToAuthChallenge answer.
struct CognitoChallenge: Equatable, Sendable {
    let name: String
    let parameters: [String: String]
    /// Sent back with the answer (RespondToAuthChallenge's `Session`); PASSWORD_VERIFIER has none.
    let session: String?

    static func from(_ answer: JSONValue) -> CognitoChallenge? {
        guard let name = answer["ChallengeName"]?.string, !name.isEmpty else { return nil }
        var parameters: [String: String] = [:]
        if case .object(let members)? = answer["ChallengeParameters"] {
            for (key, value) in members { if let text = value.string { parameters[key] = text } }
        }
        return CognitoChallenge(name: name, parameters: parameters, session: answer["Session"]?.string)
    }

    /// The user name every later answer carries (and its SECRET_HASH is computed for): the
    /// challenge's own USERNAME, else USER_ID_FOR_SRP, else the login name. Users who sign in by
    /// e-mail have another pool user name.
    func username(loginName: String) -> String {
        parameters["USERNAME"] ?? parameters["USER_ID_FOR_SRP"] ?? loginName
    }
}

/// The answers to the challenges a person answers (CONTRACT.md "Logging in a person"): pure but for
/// `ask`, which puts a question to the person. PASSWORD_VERIFIER is SRP's, answered without asking.
enum ChallengeAnswers {
    static func responses(for challenge: CognitoChallenge, ask: (LoginQuestion) -> String?) throws -> [String: String] {
        let name = shownName(challenge.name)
        func answer(_ question: String, secret: Bool = false) throws -> String {
            guard let text = ask(LoginQuestion(question, secret: secret)) else {
                throw TokenSourceError.refused("Cognito asks for \(name), and no answer came (the end of the input)")
            }
            let trimmed = secret ? text : text.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { throw TokenSourceError.refused("Cognito asks for \(name), and the answer was empty") }
            return trimmed
        }
        let destination = challenge.parameters["CODE_DELIVERY_DESTINATION"].map { " \(shown($0))" } ?? ""
        switch challenge.name {
        case "SOFTWARE_TOKEN_MFA":
            return ["SOFTWARE_TOKEN_MFA_CODE": try answer("Cognito asks for SOFTWARE_TOKEN_MFA: the code from your authenticator app:")]
        case "SMS_MFA":
            return ["SMS_MFA_CODE": try answer("Cognito asks for SMS_MFA: the code sent by SMS to\(destination):")]
        case "EMAIL_OTP":
            return ["EMAIL_OTP_CODE": try answer("Cognito asks for EMAIL_OTP: the code sent by e-mail to\(destination):")]
        case "SELECT_MFA_TYPE":
            let offered = jsonList(challenge.parameters["MFAS_CAN_CHOOSE"]) ?? ["SMS_MFA", "SOFTWARE_TOKEN_MFA", "EMAIL_OTP"]
            let choice = try answer("Cognito asks for SELECT_MFA_TYPE: which second factor (\(offered.map(shown).joined(separator: ", ")))?")
            guard offered.contains(choice) else {
                throw TokenSourceError.refused("SELECT_MFA_TYPE: \(shown(choice)) is not one of \(offered.map(shown).joined(separator: ", "))")
            }
            return ["ANSWER": choice]
        case "NEW_PASSWORD_REQUIRED":
            var responses = ["NEW_PASSWORD": try answer("Cognito asks for NEW_PASSWORD_REQUIRED: a new password:", secret: true)]
            // Each required attribute, in the challenge's order ("userAttributes.<name>").
            for item in jsonList(challenge.parameters["requiredAttributes"]) ?? [] {
                let key = item.hasPrefix("userAttributes.") ? item : "userAttributes." + item
                let attribute = key.dropFirst("userAttributes.".count)
                responses[key] = try answer("Cognito asks for the attribute \(shown(String(attribute))):")
            }
            return responses
        case "MFA_SETUP":
            throw TokenSourceError.refused(
                "Cognito asks for MFA_SETUP: this user has no second factor set up yet; set one up (the AWS console, or an app "
                    + "built on Amplify), then log in again")
        default:
            throw TokenSourceError.refused("Cognito asks for \(name), which tokenproxy does not answer")
        }
    }

    /// A JSON list of strings given as a string (`"[\"SMS_MFA\",\"SOFTWARE_TOKEN_MFA\"]"`).
    static func jsonList(_ text: String?) -> [String]? {
        guard let text, case .array(let items)? = JSONValue.parse(Array(text.utf8)) else { return nil }
        return items.compactMap(\.string)
    }

    /// A challenge name fit to print: letters, digits and `_` only.
    static func shownName(_ name: String) -> String {
        name.utf8.count <= 64 && name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) ? name : "an unnamed challenge"
    }

    private static func shown(_ text: String) -> String { CallbackRules.shown(text, limit: 100) }
}
