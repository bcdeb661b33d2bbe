import Config
import Foundation
import Testing

@testable import Credentials

/// The pure parts of Cognito identity pools (CONTRACT.md "Amazon Cognito identity pools"): the
/// request bodies, the reading of the answers, and what an error answer means.
@Suite struct CognitoIdentityCallsTests {
    let provider = "cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Ab12Cd34E"

    func json(_ bytes: [UInt8]) -> [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] }

    @Test func theProviderNameIsTheUserPoolsIssuerWithoutScheme() {
        let c = CognitoIdentityPoolConfiguration(
            identityPoolID: "eu-west-1:0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d", userPoolID: "eu-west-1_Ab12Cd34E", region: "eu-west-1", service: "es")
        #expect(c.loginsProvider == provider)
    }

    @Test func getIDBody() throws {
        let body = CognitoIdentityCalls.getIDBody(identityPoolID: "eu-west-1:0a1b", provider: provider, idToken: "h.p.s")
        #expect(String(decoding: body, as: UTF8.self) == #"{"IdentityPoolId":"eu-west-1:0a1b","Logins":{"\#(provider)":"h.p.s"}}"#)
    }

    @Test func credentialsBody() throws {
        let body = CognitoIdentityCalls.credentialsBody(identityID: "eu-west-1:id-1", provider: provider, idToken: "h.p.s")
        let object = try #require(json(body))
        #expect(object["IdentityId"] as? String == "eu-west-1:id-1")
        #expect(object["Logins"] as? [String: String] == [provider: "h.p.s"])
        #expect(object.count == 2)
    }

    @Test func readsGetIdsAnswer() throws {
        #expect(try CognitoIdentityCalls.identityID(in: Array(#"{"IdentityId":"eu-west-1:abc"}"#.utf8)) == "eu-west-1:abc")
        for bad in [#"{}"#, #"{"IdentityId":""}"#, #"{"IdentityId":"a b"}"#, "<html>", #"{"IdentityId":7}"#] {
            #expect(throws: CognitoIdentityCalls.Failure.self) { try CognitoIdentityCalls.identityID(in: Array(bad.utf8)) }
        }
    }

    @Test func readsTheCredentials() throws {
        let answer = #"""
            {"IdentityId":"eu-west-1:abc","Credentials":{"AccessKeyId":"ASIAX","SecretKey":"se/cret+","SessionToken":"tok==","Expiration":1.7964e9}}
            """#
        let read = try CognitoIdentityCalls.credentials(in: Array(answer.utf8))
        #expect(read.credentials == AWSCredentials(accessKeyID: "ASIAX", secretAccessKey: "se/cret+", sessionToken: "tok==", expiration: 1.7964e9))
        #expect(read.identityID == "eu-west-1:abc")
        // The token a session holds: the container endpoint's JSON, read back the same.
        let back = try #require(AWSCredentials(containerEndpointJSON: read.credentials.containerEndpointJSON))
        #expect(back.accessKeyID == "ASIAX" && back.secretAccessKey == "se/cret+" && back.sessionToken == "tok==")
        #expect(back.expiration == 1.7964e9)
    }

    @Test func unusableCredentialsArePassingFailures() {
        for bad in [
            #"{"Credentials":{"AccessKeyId":"A","SecretKey":"S","SessionToken":"T"}}"#,
            #"{"Credentials":{"AccessKeyId":"A","SecretKey":"S","Expiration":1.7e9}}"#,
            #"{"Credentials":{"AccessKeyId":"A","SecretKey":"S T","SessionToken":"T","Expiration":1.7e9}}"#,
            #"{"Credentials":{"AccessKeyId":"A","SecretKey":"S","SessionToken":"T","Expiration":"2026-01-01T00:00:00Z"}}"#,
            #"{"Credentials":"none"}"#, "",
        ] {
            do {
                _ = try CognitoIdentityCalls.credentials(in: Array(bad.utf8))
                Issue.record("accepted \(bad)")
            } catch {
                guard case .passing(_, .badAnswer) = error else {
                    Issue.record("\(bad): \(error)")
                    continue
                }
            }
        }
    }

    func failure(_ operation: CognitoIdentityCalls.Operation, _ status: Int, _ body: String, field: String? = nil) -> CognitoIdentityCalls.Failure {
        CognitoIdentityCalls.failure(of: operation, status: status, body: Array(body.utf8), errorTypeField: field, secrets: ["h.p.s"])
    }

    @Test func errorAnswersByType() {
        guard case .refused(let reason) = failure(.getCredentials, 400, #"{"__type":"NotAuthorizedException","message":"Invalid login token."}"#)
        else {
            Issue.record("NotAuthorizedException is a refusal")
            return
        }
        #expect(reason.contains("Invalid login token."))
        guard case .refused = failure(.getID, 400, #"{"__type":"com.amazonaws.cognito.identity.model#NotAuthorizedException"}"#) else {
            Issue.record("a qualified type is read too")
            return
        }
        #expect(failure(.getCredentials, 400, #"{"__type":"ResourceNotFoundException"}"#) == .identityGone)
        guard case .configuration = failure(.getID, 400, #"{"__type":"ResourceNotFoundException"}"#) else {
            Issue.record("an unknown pool at GetId is the configuration's")
            return
        }
        guard case .configuration = failure(.getID, 400, "", field: "InvalidParameterException:http://internal.amazon.com/") else {
            Issue.record("x-amzn-ErrorType is read when the body has no type")
            return
        }
        guard case .passing(_, .rateLimited) = failure(.getCredentials, 400, #"{"__type":"TooManyRequestsException"}"#) else {
            Issue.record("throttling is rate limiting")
            return
        }
        guard case .passing(_, .unavailable) = failure(.getCredentials, 500, "<html>") else {
            Issue.record("a 5xx is a passing failure")
            return
        }
        // A message that carries the token sent is not shown.
        guard case .refused(let shown) = failure(.getID, 400, #"{"__type":"NotAuthorizedException","message":"bad token h.p.s"}"#) else {
            Issue.record("refusal")
            return
        }
        #expect(!shown.contains("h.p.s"))
    }
}
