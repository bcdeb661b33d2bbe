import Testing

@testable import Credentials
@testable import IdentityHTTP

/// The STS answers as moto_server 5.2.1 sent them (2026-12-06), byte for byte, and STS's documented
/// shapes: the pretty-printed answer and `<ErrorResponse><Error>`.
@Suite struct STSXMLTests {
    /// moto_server's AssumeRoleWithWebIdentity answer for RoleSessionName `s&<1>`.
    static let webIdentityAnswer =
        #"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIARZPUZDIKJS5B3H7S</AccessKeyId><SecretAccessKey>FGeHxd6vWhbdmWLUZ2vjYDqD3AZR+ztRBdpZLxrt</SecretAccessKey><SessionToken>FQoGZXIvYXdzEBYaDqnuU1yz7IkAKZqd+Nn3QBUWrllgOIc7xCpp78UjDOxNu3P3doUBu7CIgBf40eINT+V5htezT2oVzu78HHTYgSzJQYyElZKA89IgahFPvPs5iC1aLTKH/g/meYnWaK0vbfl4TfcfdVZaX4Sb9jYG/XAzsNDObcdKWY1YE3qJoHbDQMcc+MkG+e1H2UMcUaBXF9pTOksVJ4Pl9ORVr5hbRCdtOiM9tPgBuz8u/YuO2y/GPMnNYHb1+apUO8bmDGQ+acL0ma7DHJTj2n01eQULC+AhCVRnqRYkP3FYa6r+V8JG6MVxMVyyyjB6XgvA7utEpgaYkgkjqHPh65eVP+A=</SessionToken><Expiration>2026-12-06T23:25:10.880924Z</Expiration></Credentials><AssumedRoleUser><AssumedRoleId>ARO123EXAMPLE123:s&amp;&lt;1&gt;</AssumedRoleId><Arn>arn:aws:sts::123456789012:assumed-role/app/s&amp;&lt;1&gt;</Arn></AssumedRoleUser><PackedPolicySize>6</PackedPolicySize></AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>Fbfo4DxpLY3IVwykr8O7FFOAy9S3JffFZ593MSMREVO1rajMN81K</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>"#
    /// moto_server's AssumeRole answer.
    static let assumeRoleAnswer =
        #"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><Credentials><AccessKeyId>ASIARZPUZDIKGAKIRJIQ</AccessKeyId><SecretAccessKey>5GW2h4zmfar7agjSzftV1uhoT03QpP83FOWVPpET</SecretAccessKey><SessionToken>FQoGZXIvYXdzEBYaDD5V/F9HjXpUJf+lT19eHmjBKj+iG0e8IvIVlBlNAqlmBGNAzuooZFQocGNbRPjWKuCEQxslDYQVAy5rIYUa08OwlvtExNwBiEcYfaJvVOi6yvEVfe+gEQ0nx9rz0Xkufv0NKukOTOOmcTwCtEEA3B1PvSAKKz+cqG0ffuaVqUd/1CELRVFqADqebFI+J5PNIrEAlUQHpLoJHaSPHp4yJezAI31041DLBc/I1vQ/+qOzoj8g9j7fcwKaLF1DK2cPuUaBOY2IAeT1SKWTZGeTGsf8judmuIJ2gKjZWFolxtoEj72zStKOBmnqbYB0yu7PdF2/RMOw6avYvnDBebM=</SessionToken><Expiration>2026-12-06T22:40:10.981840Z</Expiration></Credentials><AssumedRoleUser><AssumedRoleId>AROA3X42LBCDC9RTVY3JD:s1</AssumedRoleId><Arn>arn:aws:sts::123456789012:assumed-role/app/s1</Arn></AssumedRoleUser><PackedPolicySize>6</PackedPolicySize></AssumeRoleResult><ResponseMetadata><RequestId>Pg5i5FUJ3Q1XD4WKJ88xpZoLxwWWYNz3L6xj10m4iNQDA2l31FfY</RequestId></ResponseMetadata></AssumeRoleResponse>"#
    /// moto_server's refusal of a signature by an unknown key (403): `<Errors>` wraps the `<Error>`.
    static let motoRefusal =
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<ErrorResponse><Errors><Error><Code>InvalidClientTokenId</Code><Message>The security token included in the request is invalid.</Message><Type>Sender</Type></Error></Errors></ErrorResponse>"

    @Test func webIdentityAnswerFromMoto() throws {
        let credentials = try STSAnswer.credentials(Array(Self.webIdentityAnswer.utf8), source: "web_identity")
        #expect(credentials.accessKeyID == "ASIARZPUZDIKJS5B3H7S")
        #expect(credentials.secretAccessKey == "FGeHxd6vWhbdmWLUZ2vjYDqD3AZR+ztRBdpZLxrt")
        #expect(credentials.sessionToken?.hasPrefix("FQoGZXIvYXdzEBYaDqnuU1yz") == true)
        #expect(credentials.sessionToken?.hasSuffix("HPh65eVP+A=") == true)
        #expect(credentials.expiration == RFC3339.parse("2026-12-06T23:25:10.880924Z"))
        let root = try #require(STSXMLElement.parse(Array(Self.webIdentityAnswer.utf8)))
        let user = root.child("AssumeRoleWithWebIdentityResult")?.child("AssumedRoleUser")
        #expect(user?.value("AssumedRoleId") == "ARO123EXAMPLE123:s&<1>")
        #expect(user?.value("Arn") == "arn:aws:sts::123456789012:assumed-role/app/s&<1>")
    }

    @Test func assumeRoleAnswerFromMoto() throws {
        let credentials = try STSAnswer.credentials(Array(Self.assumeRoleAnswer.utf8), source: "assume_role")
        #expect(credentials.accessKeyID == "ASIARZPUZDIKGAKIRJIQ")
        #expect(credentials.secretAccessKey == "5GW2h4zmfar7agjSzftV1uhoT03QpP83FOWVPpET")
        #expect(credentials.sessionToken?.hasSuffix("avYvnDBebM=") == true)
        #expect(credentials.expiration == RFC3339.parse("2026-12-06T22:40:10.981840Z"))
    }

    /// STS's own layout: a declaration, indentation, the fields in another order, more elements.
    @Test func prettyPrintedAnswer() throws {
        let body = """
            <?xml version="1.0" encoding="UTF-8"?>
            <AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
              <AssumeRoleWithWebIdentityResult>
                <SubjectFromWebIdentityToken>system:serviceaccount:shop:orders</SubjectFromWebIdentityToken>
                <Audience>sts.amazonaws.com</Audience>
                <AssumedRoleUser>
                  <Arn>arn:aws:sts::111122223333:assumed-role/orders/tokenproxy-pod</Arn>
                  <AssumedRoleId>AROAEXAMPLEROLEID:tokenproxy-pod</AssumedRoleId>
                </AssumedRoleUser>
                <Credentials>
                  <SessionToken>IQoJb3JpZ2luX2VjE&#x2F;token&#47;part</SessionToken>
                  <SecretAccessKey>
                    secret/with+plus
                  </SecretAccessKey>
                  <Expiration>2026-12-07T01:00:00Z</Expiration>
                  <AccessKeyId>ASIAEXAMPLEKEY</AccessKeyId>
                </Credentials>
                <Provider>arn:aws:iam::111122223333:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/X</Provider>
              </AssumeRoleWithWebIdentityResult>
              <!-- a comment -->
              <ResponseMetadata><RequestId>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</RequestId></ResponseMetadata>
            </AssumeRoleWithWebIdentityResponse>

            """
        let credentials = try STSAnswer.credentials(Array(body.utf8), source: "web_identity")
        #expect(credentials.accessKeyID == "ASIAEXAMPLEKEY")
        #expect(credentials.secretAccessKey == "secret/with+plus")
        #expect(credentials.sessionToken == "IQoJb3JpZ2luX2VjE/token/part")
        #expect(credentials.expiration == RFC3339.parse("2026-12-07T01:00:00Z"))
    }

    @Test func errorAnswer() {
        let body = """
            <ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
              <Error>
                <Type>Sender</Type>
                <Code>InvalidIdentityToken</Code>
                <Message>Couldn&apos;t retrieve verification key from your identity provider, &quot;x&quot; &lt;y&gt; &#233;</Message>
              </Error>
              <RequestId>2c5e9c3a-0f6e-4ea4-8c4c-EXAMPLE</RequestId>
            </ErrorResponse>
            """
        let text = STSAnswer.errorText(HTTPCallResponse(status: 400, headers: [], body: Array(body.utf8)))
        #expect(text == "HTTP 400 InvalidIdentityToken: Couldn't retrieve verification key from your identity provider, \"x\" <y> é")
        // Code without Message.
        let bare = "<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>"
        #expect(STSAnswer.errorText(HTTPCallResponse(status: 403, headers: [], body: Array(bare.utf8))) == "HTTP 403 AccessDenied")
    }

    /// moto's `<Errors><Error>` is not STS's shape: as with XMLCoder before, the body's start is shown.
    @Test func motoRefusalFallsBackToTheBody() {
        let response = HTTPCallResponse(status: 403, headers: [], body: Array(Self.motoRefusal.utf8))
        #expect(STSAnswer.errorText(response) == response.refusalText)
        #expect(throws: AWSCredentialError.self) { try STSAnswer.credentials(Array(Self.motoRefusal.utf8), source: "web_identity") }
    }

    @Test func entitiesCDATAAndPrefixes() throws {
        let body = "<a:Root xmlns:a='x'><a:V attr=\"1>2\">&#65;&#x42;<![CDATA[<&>]]>&amp;</a:V><Empty/><E></E></a:Root>"
        let root = try #require(STSXMLElement.parse(Array(body.utf8)))
        #expect(root.name == "Root")
        #expect(root.value("V") == "AB<&>&")
        #expect(root.value("Empty") == "")
        #expect(root.value("E") == "")
        #expect(root.children.map(\.name) == ["V", "Empty", "E"])
    }

    @Test(arguments: [
        "", "   ", "text", "<a>", "<a></b>", "<a><b></a></b>", "<a>&unknown;</a>", "<a>&amp</a>", "<a>& b</a>",
        "<a>&#0;</a>", "<a>&#xD800;</a>", "<a>&#+65;</a>", "<a></a><b></b>", "<a></a>trailing", "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>",
        "<a><!-- open</a>", "<a><![CDATA[open</a>", "<a b=\"1></a>", "</a>", "<>", "<a></ a>",
    ])
    func malformedDocumentsAreRefused(_ body: String) {
        #expect(STSXMLElement.parse(Array(body.utf8)) == nil)
    }

    @Test func nestingDeeperThanSixtyFourIsRefused() {
        let deep = String(repeating: "<a>", count: 65) + String(repeating: "</a>", count: 65)
        #expect(STSXMLElement.parse(Array(deep.utf8)) == nil)
        let ok = String(repeating: "<a>", count: 64) + String(repeating: "</a>", count: 64)
        #expect(STSXMLElement.parse(Array(ok.utf8)) != nil)
    }

    @Test func answersWithoutCredentialsAreRefused() {
        for body in [
            "<AssumeRoleResponse><AssumeRoleResult></AssumeRoleResult></AssumeRoleResponse>",
            "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken></Credentials></AssumeRoleResult></AssumeRoleResponse>",
            "<Other><AssumeRoleResult><Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken><Expiration>2026-12-07T01:00:00Z</Expiration></Credentials></AssumeRoleResult></Other>",
        ] {
            #expect(throws: AWSCredentialError.self) { try STSAnswer.credentials(Array(body.utf8), source: "assume_role") }
        }
    }
}
