import Foundation
import Sockets

/// A person's Cognito login (CONTRACT.md "Logging in a person"): USER_SRP_AUTH or
/// USER_PASSWORD_AUTH, then every challenge answered through RespondToAuthChallenge with its Session
/// until Cognito gives tokens. The password, a new password and the SRP key never reach a message.
extension CognitoProvider {
    func personLogin(username: String, password: String, questions: (any LoginQuestions)?) throws -> IssuedToken {
        registerSecret(password)
        var parameters = ["USERNAME": username]
        var srp: CognitoSRP? = nil
        if loginFlow == .srp {
            let fresh = CognitoSRP.random()
            srp = fresh
            parameters["SRP_A"] = fresh.srpA
        } else {
            parameters["PASSWORD"] = password
        }
        if let hash = secretHash(for: username) { parameters["SECRET_HASH"] = hash }
        var secrets = [password] + [parameters["SECRET_HASH"]].compactMap { $0 }
        var answer = try call(
            "InitiateAuth",
            [
                "AuthFlow": .string(srp == nil ? "USER_PASSWORD_AUTH" : "USER_SRP_AUTH"), "ClientId": .string(clientID),
                "AuthParameters": .object(parameters),
            ],
            secrets: secrets, operation: .login)
        var rounds = 0
        while let challenge = CognitoChallenge.from(answer.answer) {
            rounds += 1
            guard rounds <= 8 else { throw TokenSourceError.refused("Cognito asked more than 8 challenges in a row; giving up") }
            var responses: [String: String]
            if challenge.name == "PASSWORD_VERIFIER" {
                guard let srp else { throw TokenSourceError.refused("Cognito asks for PASSWORD_VERIFIER, an SRP answer, in a password login") }
                responses = try passwordVerifier(challenge, srp: srp, password: password)
            } else {
                guard let questions else {
                    throw TokenSourceError.refused("Cognito asks for \(ChallengeAnswers.shownName(challenge.name)), which needs a person to answer")
                }
                responses = try ChallengeAnswers.responses(for: challenge, ask: questions.answer)
                if let newPassword = responses["NEW_PASSWORD"] {
                    registerSecret(newPassword)
                    secrets.append(newPassword)
                }
            }
            let who = challenge.username(loginName: username)
            responses["USERNAME"] = who
            if let hash = secretHash(for: who) {
                responses["SECRET_HASH"] = hash
                secrets.append(hash)
            }
            var body: [String: JSONBodyValue] = [
                "ChallengeName": .string(challenge.name), "ClientId": .string(clientID), "ChallengeResponses": .object(responses),
            ]
            if let session = challenge.session { body["Session"] = .string(session) }
            answer = try call("RespondToAuthChallenge", body, secrets: secrets, operation: .login)
        }
        return try tokens(from: answer, previousUsername: nil)
    }

    /// The PASSWORD_VERIFIER answer: the SRP key from SRP_B and SALT, and the signature over the
    /// pool name, USER_ID_FOR_SRP, SECRET_BLOCK and TIMESTAMP.
    private func passwordVerifier(_ challenge: CognitoChallenge, srp: CognitoSRP, password: String) throws -> [String: String] {
        guard let poolName else {
            throw TokenSourceError.configuration("login: srp needs credentials.user_pool_id")
        }
        let p = challenge.parameters
        guard let userID = p["USER_ID_FOR_SRP"], let salt = p["SALT"], let srpB = p["SRP_B"], let block = p["SECRET_BLOCK"],
            let blockBytes = Data(base64Encoded: block)
        else {
            throw TokenSourceError.passing("Cognito's PASSWORD_VERIFIER challenge lacks USER_ID_FOR_SRP, SALT, SRP_B or SECRET_BLOCK")
        }
        let key: [UInt8]
        do {
            key = try srp.passwordKey(poolName: poolName, userID: userID, password: password, srpB: srpB, salt: salt)
        } catch .badB {
            throw TokenSourceError.refused("Cognito's SRP_B is 0 modulo N (or not a number); SRP-6a forbids going on")
        } catch .zeroU {
            throw TokenSourceError.refused("the SRP scrambler u is 0 for Cognito's SRP_B; SRP-6a forbids going on")
        } catch .badSalt {
            throw TokenSourceError.passing("Cognito's SALT is not hexadecimal")
        }
        let timestamp = CognitoSRP.timestamp(epochSeconds: Int(Syscall.wallClock()))
        let signature = CognitoSRP.signature(key: key, poolName: poolName, userID: userID, secretBlock: Array(blockBytes), timestamp: timestamp)
        return ["TIMESTAMP": timestamp, "PASSWORD_CLAIM_SECRET_BLOCK": block, "PASSWORD_CLAIM_SIGNATURE": signature]
    }
}
