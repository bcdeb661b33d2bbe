// swift-tools-version:6.0
import PackageDescription

// Layers depend only downward (docs/ARCHITECTURE.md, "Modules"):
// CCurl/CSystem/CHiredis/COpenSSL/Basics → Curl/Sockets/HTTP1 → Upstream/IdentityHTTP/Redis/TLS → Telemetry/Credentials/Config → ProxyCore/LoginListener → tokenproxy
// LoginListener is the browser login's loopback HTTP listener, on Sockets and HTTP1; Credentials sees it only
// through its `RedirectListener` protocol, which the command line fills, so Credentials stays off HTTP1.
// Basics holds the small pure values several layers share, each written once (docs/ARCHITECTURE.md).
// Curl is the only Swift module that imports CCurl; it offers typed Swift (`package` access) to the three
// libcurl users: Upstream (the proxy's transport), IdentityHTTP (the identity providers' client) and
// Redis (the TLS stream of a rediss:// store).
// Redis is the Redis client (RESP over hiredis, TLS through Curl, Sentinel), as IdentityHTTP is the HTTP
// client: it knows nothing of tokens; Credentials' Redis store keeps only the session's rules over it.
// The hot-path modules skip the run-time exclusive-access checks in release builds: callgrind counted
// them at about 5 % of a proxied request's instructions. Debug builds, which the tests run, keep them.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]
// Every target is in Swift 6 language mode (complete concurrency checking; docs/RELIABILITY.md).

let package = Package(
    name: "tokenproxy",
    products: [
        .executable(name: "tokenproxy", targets: ["tokenproxy"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // Cognito SRP's 3072-bit arithmetic (Credentials/Login/SRP.swift).
        .package(url: "https://github.com/attaswift/BigInt", from: "6.0.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // hiredis (Debian's libhiredis-dev) for the Redis module only. No `pkgConfig: "hiredis"`: its .pc file
        // adds -D_FILE_OFFSET_BITS=64, which SwiftPM drops with a warning on every build; the header is
        // in the default include path (<hiredis/hiredis.h>) and the module map links -lhiredis.
        .systemLibrary(
            name: "CHiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        // OpenSSL 3 (Debian's libssl-dev: the library libcurl already loads) for the TLS module only.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(name: "CSystem"),
        // On the request path (HTTP1's ASCII folding, the Host field's authority): `@inlinable` there.
        .target(name: "Basics", swiftSettings: hotPath),
        .target(name: "Sockets", dependencies: ["CSystem"], swiftSettings: hotPath),
        .target(name: "HTTP1", dependencies: ["Basics"], swiftSettings: hotPath),
        // On the request path: every TLS upstream byte goes through CurlEasy.send/receive.
        .target(name: "Curl", dependencies: ["CCurl"], swiftSettings: hotPath),
        .target(name: "IdentityHTTP", dependencies: ["Basics", "Curl"]),
        // Curl: the TLS stream of a rediss:// server (hiredis 0.14 has no TLS).
        .target(name: "Redis", dependencies: ["Basics", "CHiredis", "Curl", "Sockets"]),
        // Server-side TLS (the TLS listener, the forward proxy's interception) and the local CA's
        // certificates; the only Swift module that imports COpenSSL (docs/ARCHITECTURE.md, "TLS").
        .target(name: "TLS", dependencies: ["COpenSSL", "Sockets"], swiftSettings: hotPath),
        // On the request path with `audit:`: every request's line is formatted here.
        .target(name: "Logs", dependencies: ["Basics", "Sockets", .product(name: "Logging", package: "swift-log")], swiftSettings: hotPath),
        // OpenTelemetry's export (CONTRACT.md "Telemetry"): OTLP/HTTP protobuf bodies written by hand
        // (a few small, stable messages), posted from a thread of its own by IdentityHTTP's client.
        .target(
            name: "Telemetry",
            dependencies: ["Basics", "Sockets", "IdentityHTTP", "Logs", .product(name: "Logging", package: "swift-log")],
            // The exporter's thread writes every span's bytes here (bench/telemetry-instructions.sh).
            swiftSettings: hotPath
        ),
        .target(
            name: "Config", dependencies: ["Basics", "Sockets", "HTTP1", .product(name: "Yams", package: "Yams")],
            // Only what a file imports is visible: Yams's `import Foundation` must not turn the String
            // searches here into Foundation's (CFString, ICU) on the start-up path.
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        .target(
            name: "Credentials",
            dependencies: [
                "Basics", "Sockets", "IdentityHTTP", "Redis", "Config", "Logs", "Telemetry",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "BigInt", package: "BigInt"),
                // RSA (RS256, PS256) for the JWTs the proxy signs (CONTRACT.md "Secretless credentials").
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The browser login's one-shot loopback listener (RFC 8252 §7.3), behind Credentials' `RedirectListener`.
        .target(name: "LoginListener", dependencies: ["Basics", "Sockets", "HTTP1", "Config", "Credentials"]),
        .target(
            name: "Upstream",
            dependencies: ["Basics", "Curl", "Sockets"],
            swiftSettings: hotPath
        ),
        .target(
            name: "ProxyCore",
            dependencies: [
                "Basics", "Sockets", "HTTP1", "Upstream", "Credentials", "Config", "Logs", "TLS", "Telemetry",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: hotPath
        ),
        .executableTarget(
            name: "tokenproxy",
            dependencies: [
                "ProxyCore", "Config", "Credentials", "LoginListener", "Logs", "Sockets", "TLS", "Telemetry", "Upstream",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "BasicsTests", dependencies: ["Basics"]),
        .testTarget(name: "HTTP1Tests", dependencies: ["HTTP1", "TestSupport"]),
        .testTarget(name: "ConfigTests", dependencies: ["Config", "TestSupport"]),
        .testTarget(
            name: "CredentialsTests",
            dependencies: [
                "Credentials", "Config", "IdentityHTTP", "Redis", "Sockets", "TestSupport",
                // The signature checks of the JWTs the proxy signs use the public halves of the keys.
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "CryptoExtras", package: "swift-crypto"),
            ]),
        .testTarget(name: "LoginListenerTests", dependencies: ["LoginListener", "Credentials", "Config", "TestSupport"]),
        .testTarget(name: "LogsTests", dependencies: ["Logs", "Basics", .product(name: "Logging", package: "swift-log")]),
        .testTarget(
            name: "ProxyCoreTests",
            dependencies: ["ProxyCore", "HTTP1", "Config", "Upstream", "Credentials", "Sockets", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "UpstreamTests", dependencies: ["Upstream", "TestSupport"]),
        .testTarget(name: "TelemetryTests", dependencies: ["Telemetry", "Logs", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "RedisTests", dependencies: ["Redis", "Basics", "TestSupport"]),
        .testTarget(name: "SocketsTests", dependencies: ["Sockets"]),
        .testTarget(name: "TLSTests", dependencies: ["TLS", "Sockets", "TestSupport"]),
        .testTarget(name: "EndToEndTests", dependencies: ["TestSupport"]),
        .testTarget(name: "ShippingTests", dependencies: ["TestSupport", "Config", .product(name: "Yams", package: "Yams")]),
    ],
    swiftLanguageModes: [.v6]
)

// Fuzz targets (docs/RELIABILITY.md): one libFuzzer executable per decoder, in Tests/Fuzz/Sources/<name>.
// Only scripts/fuzz.sh declares them (it sets TOKENPROXY_FUZZ and builds each with
// `-sanitize=fuzzer,address` in its own scratch folder), so the regular
// `swift build` and `swift test` neither see nor build them. A new target is one line here, one
// folder with a main.swift and a seed corpus in Tests/Fuzz/corpus/<name>.
if Context.environment["TOKENPROXY_FUZZ"] != nil {
    let fuzzTargets: [(name: String, dependencies: [Target.Dependency])] = [
        ("FuzzRequestParser", ["HTTP1"]),
        ("FuzzResponseParser", ["HTTP1"]),
        ("FuzzChunkedBody", ["HTTP1"]),
        ("FuzzJWT", ["Credentials", "Logs"]),
        ("FuzzOAuth2Answer", ["Credentials", "Config", "IdentityHTTP", "Logs"]),
        ("FuzzCognitoAnswer", ["Credentials", "Config", "IdentityHTTP", "Logs"]),
        ("FuzzJSONRefreshAnswer", ["Credentials", "Config", "IdentityHTTP", "Logs"]),
        ("FuzzConfiguration", ["Config"]),
        ("FuzzExecOutput", ["Credentials"]),
    ]
    // What the targets share: the request parser driven as a connection drives it, split points,
    // identity-provider answers built from fuzz input.
    package.targets.append(.target(name: "CFuzzer", path: "Tests/Fuzz/Sources/CFuzzer"))
    package.targets.append(
        .target(name: "FuzzSupport", dependencies: ["CFuzzer", "HTTP1", "IdentityHTTP"], path: "Tests/Fuzz/Sources/FuzzSupport"))
    for target in fuzzTargets {
        package.targets.append(
            .executableTarget(
                name: target.name, dependencies: ["FuzzSupport"] + target.dependencies, path: "Tests/Fuzz/Sources/\(target.name)"))
        package.products.append(.executable(name: target.name, targets: [target.name]))
    }
}
