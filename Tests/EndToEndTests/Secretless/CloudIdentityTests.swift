import Foundation
import TestSupport
import Testing

/// `type: gce_metadata` and `type: azure_managed_identity` against `cloud_metadata.py`, which
/// follows the published request and answer formats and refuses a request without the header.
@Suite("Cloud metadata identities", .tags(.endToEnd), .timeLimit(.minutes(35)))
struct CloudIdentityTests {
    func config(_ server: PythonServer, _ credentials: String) -> String {
        credentialsConfig(upstream: server.baseURL + "/api", credentials: credentials)
    }

    /// `tokenproxy serve` with `credentials` lines against `server`.
    func serve(_ server: PythonServer, environment: [String: String] = [:], _ credentials: String) throws -> ProxyProcess {
        try ProxyProcess(config: config(server, credentials), environment: environment)
    }

    func stats(_ server: PythonServer) throws -> [String: Any] {
        try #require(try curl([server.baseURL + "/test/stats"]).json)
    }

    @Test("gce_metadata asks with Metadata-Flavor: Google for the named service account and scopes")
    func gceAccessToken() throws {
        let server = try PythonServer("cloud_metadata", arguments: ["--account", "builder@proj.iam.gserviceaccount.com"])
        // The metadata server refuses a request without the header.
        let bare = try curl([server.baseURL + "/computeMetadata/v1/instance/service-accounts/default/token"])
        #expect(bare.status == 403)
        let proxy = try serve(
            server,
            """
            type: gce_metadata
            endpoint: \(server.baseURL)
            service_account: builder@proj.iam.gserviceaccount.com
            scope: "https://www.googleapis.com/auth/cloud-platform openid"
            """)
        let answer = try curl([proxy.baseURL + "/x"])
        #expect(answer.status == 200)
        #expect(answer.json?["source"] as? String == "gce")
        let stats = try stats(server)
        #expect(stats["refused"] as? Int == 1)  // only the bare request above
        let query = try #require((stats["queries"] as? [[String: String]])?.last)
        #expect(query["scopes"] == "https://www.googleapis.com/auth/cloud-platform,openid")
    }

    @Test("gce_metadata with audience fetches an ID token, whose exp is its expiry")
    func gceIDToken() throws {
        let server = try PythonServer("cloud_metadata", arguments: ["--ttl", "600"])
        let proxy = try serve(
            server,
            """
            type: gce_metadata
            endpoint: \(server.baseURL)/
            audience: https://run.example.app
            """)
        let answer = try curl([proxy.baseURL + "/x"])
        #expect(answer.status == 200)
        #expect(answer.json?["source"] as? String == "gce_id")
        #expect(answer.json?["audience"] as? String == "https://run.example.app")
        let status = try curl([try #require(proxy.adminURL) + "/metrics"]).bodyString
        // The JWT's exp (600 s ahead), not default_lifetime (3600 s).
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("tokenproxy_token_expiry_seconds ") })
        let seconds = try #require(Int(line.split(separator: " ")[1]))
        #expect(seconds <= 600 && seconds > 0)
    }

    @Test("azure_managed_identity asks IMDS with Metadata: true for the resource and the user-assigned identity")
    func azureIMDS() throws {
        let server = try PythonServer("cloud_metadata")
        let bare = try curl([server.baseURL + "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=x"])
        #expect(bare.status == 400)
        let proxy = try serve(
            server, environment: ["IDENTITY_ENDPOINT": "", "IDENTITY_HEADER": ""],
            """
            type: azure_managed_identity
            endpoint: \(server.baseURL)
            scope: api://orders/.default
            client_id: 11111111-2222-3333-4444-555555555555
            """)
        let answer = try curl([proxy.baseURL + "/x"])
        #expect(answer.status == 200)
        #expect(answer.json?["source"] as? String == "imds")
        #expect(answer.json?["audience"] as? String == "api://orders")
        #expect(answer.json?["client_id"] as? String == "11111111-2222-3333-4444-555555555555")
    }

    @Test("azure_managed_identity uses IDENTITY_ENDPOINT with X-IDENTITY-HEADER when they are set, and never logs the header")
    func azureAppService() throws {
        let header = "identity-header-\(UUID().uuidString)"
        let server = try PythonServer("cloud_metadata", arguments: ["--identity-header", header])
        let proxy = try serve(
            server, environment: ["IDENTITY_ENDPOINT": server.baseURL + "/msi/token", "IDENTITY_HEADER": header],
            """
            type: azure_managed_identity
            resource: https://vault.azure.net
            """)
        let answer = try curl([proxy.baseURL + "/x"])
        #expect(answer.status == 200)
        #expect(answer.json?["source"] as? String == "appservice")
        #expect(try stats(server)["refused"] as? Int == 0)
        #expect(!proxy.stderr.contains(header))
    }

    /// Issue 29: an answer without `Metadata-Flavor: Google` is not Google's metadata server: its
    /// token is never used.
    @Test("a GCE answer without Metadata-Flavor: Google is refused, and its token never goes upstream")
    func gceAnswerWithoutFlavor() throws {
        let server = try PythonServer("cloud_metadata", arguments: ["--no-flavor"])
        let proxy = try ProxyProcess(config: config(server, "type: gce_metadata\nendpoint: \(server.baseURL)"))
        #expect(proxy.waitForStderr(containing: "Metadata-Flavor: Google"), "\(proxy.stderr)")
        expectProxyError(try curl([proxy.baseURL + "/x"]), status: 503, code: "token_unavailable")
        let calls = try #require(stats(server)["calls"] as? [String: Int])
        #expect((calls["gce"] ?? 0) >= 1)
    }

    /// Issue 29: the metadata and IMDS endpoints are asked directly, never through HTTP_PROXY, which
    /// would be handed the token.
    @Test("metadata identities never go through http_proxy", arguments: ["gce_metadata", "azure_managed_identity"])
    func metadataCallsBypassTheProxy(type: String) throws {
        let tiny = try Tinyproxy()
        defer { tiny.stop() }
        let server = try PythonServer("cloud_metadata")
        let proxy = try ProxyProcess(
            config: config(server, "type: \(type)\nendpoint: \(server.baseURL)\nresource: https://management.azure.com/"),
            environment: ["http_proxy": tiny.url, "HTTP_PROXY": tiny.url, "no_proxy": "", "NO_PROXY": ""])
        let answer = try curl([proxy.baseURL + "/x"])
        #expect(answer.status == 200, "\(answer.bodyString)")
        #expect(!tiny.log().lowercased().contains("metadata"), "a metadata call went through the proxy:\n\(tiny.log())")
    }

    @Test("a metadata service that answers garbage gives a named error and 503; a good answer later serves")
    func garbageAnswer() throws {
        let server = try PythonServer("cloud_metadata")
        #expect(try curl(["-X", "POST", server.baseURL + "/test/garbage"]).status == 200)
        let proxy = try serve(
            server,
            """
            type: gce_metadata
            endpoint: \(server.baseURL)
            """)
        #expect(proxy.waitForStderr(containing: "is not a JSON object"))
        #expect(try curl([proxy.baseURL + "/x"]).status == 503)
        #expect(try curl(["-X", "POST", server.baseURL + "/test/good"]).status == 200)
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh"]).status == 202)
        #expect(try eventually { try curl([proxy.baseURL + "/x"]).status == 200 })
    }
}
