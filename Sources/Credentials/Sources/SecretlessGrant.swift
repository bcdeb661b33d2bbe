import Config
import FoundationEssentials

/// The grants of `oauth2_jwt_bearer` (RFC 7523 §2.1) and `oauth2_token_exchange` (RFC 8693 §2.1):
/// each fetch builds its form from files read again when they changed, or from an assertion the
/// proxy signs afresh. Pure apart from reading those files.
final class SecretlessGrant {
    enum Kind {
        /// The assertion from a file, or signed with a key: iss, sub, aud, lifetime.
        case jwtBearer(file: WatchedFile?, key: KeyFile?, issuer: String?, subject: String?, audience: String?, lifetime: Double)
        case tokenExchange(
            subject: WatchedFile, subjectType: String, actor: WatchedFile?, actorType: String?, requestedType: String?, resource: String?)
    }

    static let jwtBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    static let tokenExchangeGrantType = "urn:ietf:params:oauth:grant-type:token-exchange"

    let kind: Kind
    var now: () -> Double = { Date().timeIntervalSince1970 }

    /// nil for the types that use another grant.
    init?(_ credentials: CredentialsConfiguration) throws {
        let x = credentials.secretless
        switch credentials.type {
        case .oauth2JWTBearer:
            let file = x.assertionFile.map { WatchedFile($0, keyPath: "credentials.assertion_file") }
            var key: KeyFile? = nil
            if file == nil {
                guard let path = x.clientKeyFile else {
                    throw ConfigurationError(keyPath: "credentials.assertion_file", reason: "oauth2_jwt_bearer needs assertion_file or client_key_file")
                }
                key = try KeyFile(path, algorithm: x.clientKeyAlg, keyID: x.clientKeyID, keyPath: "credentials.client_key_file")
                guard x.assertionIssuer != nil || credentials.clientID != nil else {
                    throw ConfigurationError(keyPath: "credentials.assertion_issuer", reason: "required to sign the assertion (or set client_id)")
                }
            }
            kind = .jwtBearer(
                file: file, key: key, issuer: x.assertionIssuer, subject: x.assertionSubject, audience: x.assertionAudience,
                lifetime: x.assertionLifetime)
        case .oauth2TokenExchange:
            guard let subject = x.subjectTokenFile else {
                throw ConfigurationError(keyPath: "credentials.subject_token_file", reason: "required for oauth2_token_exchange")
            }
            kind = .tokenExchange(
                subject: WatchedFile(subject, keyPath: "credentials.subject_token_file"), subjectType: x.subjectTokenType,
                actor: x.actorTokenFile.map { WatchedFile($0, keyPath: "credentials.actor_token_file") }, actorType: x.actorTokenType,
                requestedType: x.requestedTokenType, resource: x.resource)
        default:
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
        case .jwtBearer(let file, let key, let issuer, let subject, let audience, let lifetime):
            let assertion: String
            if let file {
                assertion = try file.read()
                try ClientAuthentication.checkAssertion(assertion, path: file.path, now: now())
            } else {
                let signingKey = try key!.current()
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
