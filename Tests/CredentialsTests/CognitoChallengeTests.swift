import Testing

@testable import Credentials

/// The answers to Cognito's challenges, with the person's answers scripted: what is asked, in which
/// order, and what is sent back.
@Suite struct CognitoChallengeTests {
    /// Answers in order; records the questions.
    final class Script {
        var answers: [String?]
        var asked: [LoginQuestion] = []
        init(_ answers: [String?]) { self.answers = answers }
        func ask(_ question: LoginQuestion) -> String? {
            asked.append(question)
            return answers.isEmpty ? nil : answers.removeFirst()
        }
    }

    private func challenge(_ name: String, _ parameters: [String: String] = [:]) -> CognitoChallenge {
        CognitoChallenge(name: name, parameters: parameters, session: "s")
    }

    @Test func aTOTPCodeIsAskedAndSentAsSoftwareTokenMFACode() throws {
        let script = Script(["123456"])
        #expect(try ChallengeAnswers.responses(for: challenge("SOFTWARE_TOKEN_MFA"), ask: script.ask) == ["SOFTWARE_TOKEN_MFA_CODE": "123456"])
        #expect(script.asked.count == 1 && !script.asked[0].secret)
    }

    @Test func smsAndEmailCodesShowWhereTheCodeWent() throws {
        let sms = Script([" 654321 "])
        #expect(
            try ChallengeAnswers.responses(for: challenge("SMS_MFA", ["CODE_DELIVERY_DESTINATION": "+*******0100"]), ask: sms.ask)
                == ["SMS_MFA_CODE": "654321"])
        #expect(sms.asked[0].text.contains("+*******0100"))
        let email = Script(["111222"])
        #expect(
            try ChallengeAnswers.responses(for: challenge("EMAIL_OTP", ["CODE_DELIVERY_DESTINATION": "a***@e***"]), ask: email.ask)
                == ["EMAIL_OTP_CODE": "111222"])
        #expect(email.asked[0].text.contains("a***@e***"))
    }

    @Test func selectMFATypeTakesOnlyAnOfferedKind() throws {
        let offered = ["MFAS_CAN_CHOOSE": "[\"SMS_MFA\",\"SOFTWARE_TOKEN_MFA\"]"]
        #expect(
            try ChallengeAnswers.responses(for: challenge("SELECT_MFA_TYPE", offered), ask: Script(["SOFTWARE_TOKEN_MFA"]).ask) == [
                "ANSWER": "SOFTWARE_TOKEN_MFA"
            ])
        #expect(throws: TokenSourceError.self) {
            try ChallengeAnswers.responses(for: challenge("SELECT_MFA_TYPE", offered), ask: Script(["EMAIL_OTP"]).ask)
        }
    }

    @Test func aNewPasswordIsAskedSecretlyThenEachRequiredAttributeInOrder() throws {
        let script = Script(["New-pass-1 ", "Ann", "+15550100"])
        let parameters = ["requiredAttributes": "[\"userAttributes.name\",\"userAttributes.phone_number\"]", "userAttributes": "{}"]
        let responses = try ChallengeAnswers.responses(for: challenge("NEW_PASSWORD_REQUIRED", parameters), ask: script.ask)
        #expect(responses == ["NEW_PASSWORD": "New-pass-1 ", "userAttributes.name": "Ann", "userAttributes.phone_number": "+15550100"])
        #expect(script.asked.map(\.secret) == [true, false, false])
        #expect(script.asked[1].text.contains("name") && script.asked[2].text.contains("phone_number"))
    }

    @Test(arguments: ["MFA_SETUP", "CUSTOM_CHALLENGE", "DEVICE_SRP_AUTH"])
    func challengesThatCannotBeAnsweredEndTheLoginNamingThem(name: String) {
        let script = Script(["x"])
        do {
            _ = try ChallengeAnswers.responses(for: challenge(name), ask: script.ask)
            Issue.record("\(name) was answered")
        } catch let error as TokenSourceError {
            guard case .refused(let reason) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(reason.contains(name))
        } catch {
            Issue.record("\(error)")
        }
        #expect(script.asked.isEmpty)
    }

    @Test func theEndOfTheAnswersOrAnEmptyOneEndsTheLogin() {
        #expect(throws: TokenSourceError.self) { try ChallengeAnswers.responses(for: challenge("SMS_MFA"), ask: Script([]).ask) }
        #expect(throws: TokenSourceError.self) { try ChallengeAnswers.responses(for: challenge("SMS_MFA"), ask: Script(["  "]).ask) }
    }

    @Test func laterAnswersUseTheChallengesOwnUserName() {
        #expect(challenge("SMS_MFA", ["USERNAME": "u-1", "USER_ID_FOR_SRP": "u-2"]).username(loginName: "ann@example.com") == "u-1")
        #expect(challenge("PASSWORD_VERIFIER", ["USER_ID_FOR_SRP": "u-2"]).username(loginName: "ann@example.com") == "u-2")
        #expect(challenge("SMS_MFA").username(loginName: "ann@example.com") == "ann@example.com")
    }

    @Test func aChallengeIsReadFromAnAnswer() throws {
        let answer = try #require(
            JSONValue.parse(Array(#"{"ChallengeName":"SMS_MFA","Session":"abc","ChallengeParameters":{"USERNAME":"u-1","X":"y"}}"#.utf8)))
        #expect(CognitoChallenge.from(answer) == CognitoChallenge(name: "SMS_MFA", parameters: ["USERNAME": "u-1", "X": "y"], session: "abc"))
        #expect(CognitoChallenge.from(try #require(JSONValue.parse(Array(#"{"AuthenticationResult":{}}"#.utf8)))) == nil)
    }
}
