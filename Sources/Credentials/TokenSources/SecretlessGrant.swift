import Config
import FoundationEssentials

/// The grants of `oauth2_jwt_bearer` (RFC 7523 §2.1) and `oauth2_token_exchange` (RFC 8693 §2.1):
/// each fetch builds its form from files read again when they changed, or from an assertion the
/// proxy signs afresh. Pure apart from reading those files.
final class SecretlessGrant {
    enum Kind {
        /// The assertion from a file, or signed with a key: iss, sub, aud, lifetime.
        case jwtBearer(Assertion)
        case tokenExchange(
            subject: WatchedFile, subjectType: String, actor: WatchedFile?, actorType: String?, requestedType: String?, resource: String?)
    }

    enum Assertion {
        case file(WatchedFile)
        case signed(key: KeyFile, issuer: String?, subject: String?, audience: String?, lifetime: Double)
    }

    static let jwtBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    static let tokenExchangeGrantType = "urn:ietf:params:oauth:grant-type:token-exchange"

    let kind: Kind
    var now: () -> Double = { Date().timeIntervalSince1970 }

    /// nil for the types that use another grant.
    init?(_ source: CredentialsSource) throws {
        switch source {
        case .oauth2JWTBearer(let c):
            switch c.assertion {
            case .file(let path):
                kind = .jwtBearer(.file(WatchedFile(path, keyPath: "credentials.assertion_file")))
            case .signed(let signed):
                let key = try KeyFile(signed.key.path, algorithm: signed.key.algorithm, keyID: signed.key.keyID, keyPath: "credentials.client_key_file")
                guard signed.issuer != nil || c.client.clientID != nil else {
                    throw ConfigurationError(keyPath: "credentials.assertion_issuer", reason: "required to sign the assertion (or set client_id)")
                }
                kind = .jwtBearer(
                    .signed(key: key, issuer: signed.issuer, subject: signed.subject, audience: signed.audience, lifetime: signed.lifetime))
            }
        case .oauth2TokenExchange(let c):
            kind = .tokenExchange(
                subject: WatchedFile(c.subjectTokenFile, keyPath: "credentials.subject_token_file"), subjectType: c.subjectTokenType,
                actor: c.actorToken.map { WatchedFile($0.file, keyPath: "credentials.actor_token_file") }, actorType: c.actorToken?.type,
                requestedType: c.requestedTokenType, resource: c.resource)
        case .oauth2Refresh, .oauth2ClientCredentials, .cognito, .jsonRefresh, .gceMetadata, .azureManagedIdentity, .static, .file, .exec, .aws,
            .gitHubApp:
            return nil
        }
    }

    var isExchange: Bool {
        if case .tokenExchange = kind { return true }
        return false
    }

    /// How the call is named in errors.
    var call: String { isExchange ? "token exchange" : "jwt-bearer grant" }

    /// The grant's form fields and the values that must never appear in an error.
    func form(clientID: String?, tokenEndpoint: String) throws -> ([(String, String)], [String]) {
        switch kind {
        case .jwtBearer(let source):
            let assertion: String
            switch source {
            case .file(let file):
                assertion = try file.read()
                try ClientAuthentication.checkAssertion(assertion, path: file.path, now: now())
            case .signed(let key, let issuer, let subject, let audience, let lifetime):
                let signingKey = try key.current()
                let iss = issuer ?? clientID ?? ""
                let claims = GrantAssertionClaims.make(
                    issuer: iss, subject: subject ?? iss, audience: audience ?? tokenEndpoint, lifetime: lifetime, now: now(), jti: JWS.randomID())
                assertion = try JWS.sign(header: ClientAssertionClaims.header(signingKey), claims: claims, key: signingKey)
                registerSecret(assertion)
            }
            return ([("grant_type", Self.jwtBearerGrantType), ("assertion", assertion)], [assertion])
        case .tokenExchange(let subject, let subjectType, let actor, let actorType, let requestedType, let resource):
            let subjectToken = try subject.read()
            var form = [("grant_type", Self.tokenExchangeGrantType), ("subject_token", subjectToken), ("subject_token_type", subjectType)]
            var secrets = [subjectToken]
            if let actor, let actorType {
                let actorToken = try actor.read()
                form += [("actor_token", actorToken), ("actor_token_type", actorType)]
                secrets.append(actorToken)
            }
            if let requestedType { form.append(("requested_token_type", requestedType)) }
            if let resource { form.append(("resource", resource)) }
            return (form, secrets)
        }
    }
}
