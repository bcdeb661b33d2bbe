import Testing

@testable import Config

/// CONTRACT.md "Programs in a sandbox", "Placeholders": `placeholder` and `scrub` as a route reads
/// them, a `callers_file`'s lines, and what `check` refuses, each by key and reason.
@Suite struct PlaceholderConfigurationTests {
    static let value = "sk-ant-api03-placeholder-0123456789"
    static let environment = minimalEnvironment.merging(["PLACEHOLDER": value]) { $1 }

    func errors(_ yaml: String, environment: [String: String] = Self.environment) -> [ConfigurationError] {
        parseError(yaml, environment: environment)?.all ?? []
    }

    @Test func valueEnvGivesTheDefaultCallerAndScrubsByDefault() throws {
        let route = try parse(minimalYAML + "\nplaceholder: {value_env: PLACEHOLDER}", environment: Self.environment).configuration.routes[0]
        #expect(route.placeholder?.callers == [PlaceholderCaller(name: "default", value: Self.value)])
        #expect(route.placeholder?.callersFile == nil)
        #expect(route.scrub)
    }

    @Test func withoutPlaceholderNothingIsScrubbedUnlessAsked() throws {
        #expect(try parse(minimalYAML).configuration.routes[0].scrub == false)
        #expect(try parse(minimalYAML + "\nscrub: true").configuration.routes[0].scrub)
        let off = try parse(minimalYAML + "\nplaceholder: {value_env: PLACEHOLDER}\nscrub: false", environment: Self.environment)
        #expect(off.configuration.routes[0].scrub == false)
    }

    @Test func anUnsetVariableIsAnErrorNamingIt() {
        let found = errors(minimalYAML + "\nplaceholder: {value_env: NOT_SET_ANYWHERE}")
        #expect(found.map(\.keyPath) == ["placeholder.value_env"])
        #expect(found.first?.reason.contains("NOT_SET_ANYWHERE is not set") == true)
    }

    @Test func exactlyOneSourceIsTaken() {
        #expect(errors(minimalYAML + "\nplaceholder: {}").first?.reason.contains("needs one of value_env, value_file or callers_file") == true)
        let two = errors(minimalYAML + "\nplaceholder: {value_env: PLACEHOLDER, callers_file: /x}")
        #expect(two.map(\.keyPath) == ["placeholder"])
        #expect(two.first?.reason.contains("value_env and callers_file") == true)
        #expect(errors(minimalYAML + "\nplaceholder: {value: x}").contains { $0.keyPath == "placeholder.value" })
    }

    @Test func aShortPlaceholderIsRefused() {
        let found = errors(minimalYAML + "\nplaceholder: {value_env: SHORT}", environment: minimalEnvironment.merging(["SHORT": "sk-short"]) { $1 })
        #expect(found.map(\.keyPath) == ["placeholder.value_env"])
        #expect(found.first?.reason.contains("at least 22 characters") == true)
    }

    @Test func aPlaceholderEqualToARealCredentialIsRefused() {
        let same = minimalEnvironment.merging(["PLACEHOLDER": "static-token-value-long-enough-1"]) { $1 }.merging(["TOKEN": "static-token-value-long-enough-1"])
        { $1 }
        let found = errors(minimalYAML + "\nplaceholder: {value_env: PLACEHOLDER}", environment: same)
        #expect(found.map(\.keyPath) == ["placeholder"])
        #expect(found.first?.reason.contains("is a real credential") == true)
        #expect(!(found.first?.reason.contains("static-token-value") ?? true))
    }

    @Test func aPlaceholderOfAnAWSKeyFromTheEnvironmentIsRefused() {
        let yaml = """
            upstream: https://s3.example.com
            credentials: {type: aws, region: us-east-1, service: s3, source: environment}
            placeholder: {value_env: PLACEHOLDER}
            """
        let environment = ["PLACEHOLDER": "AKIAREALKEYREALKEY0123", "AWS_ACCESS_KEY_ID": "AKIAREALKEYREALKEY0123", "AWS_SECRET_ACCESS_KEY": "s"]
        #expect(errors(yaml, environment: environment).contains { $0.reason.contains("is a real credential") })
    }

    @Test func aPlaceholderOfTwoRoutesWithOtherCredentialsIsRefused() {
        let yaml = """
            routes:
              - name: one
                match: {path_prefix: /one/}
                upstream: https://one.example.com
                credentials: {type: static, token_env: TOKEN}
                placeholder: {value_env: PLACEHOLDER}
              - name: two
                match: {path_prefix: /two/}
                upstream: https://two.example.com
                credentials: {type: static, token_env: TOKEN2}
                placeholder: {value_env: PLACEHOLDER}
            """
        let found = errors(yaml, environment: Self.environment.merging(["TOKEN2": "another-real-token-value"]) { $1 })
        #expect(found.map(\.keyPath) == ["routes[1].placeholder"])
        #expect(found.first?.reason.contains("also a placeholder of routes[0]") == true)
    }

    /// GitHub's API and git over HTTPS with one token: the placeholder stands for that one secret.
    @Test func routesThatSendTheSameCredentialMayShareAPlaceholder() {
        let yaml = """
            routes:
              - name: api
                match: {path_prefix: /api/}
                upstream: https://api.example.com
                credentials: {type: static, token_env: TOKEN}
                placeholder: {value_env: PLACEHOLDER}
              - name: git
                match: {path_prefix: /git/}
                upstream: https://git.example.com
                credentials: {type: static, token_env: TOKEN}
                placeholder: {value_env: PLACEHOLDER}
            """
        #expect(errors(yaml).isEmpty)
    }

    @Test func aTopLevelPlaceholderWithRoutesIsRefused() {
        let yaml = """
            placeholder: {value_env: PLACEHOLDER}
            routes:
              - name: one
                match: {path_prefix: /one/}
                upstream: https://one.example.com
                credentials: {type: static, token_env: TOKEN}
            """
        #expect(errors(yaml).contains { $0.keyPath == "placeholder" && $0.reason.contains("in each route") })
    }

    @Test func checkMasksThePlaceholder() throws {
        let described = try parse(minimalYAML + "\nplaceholder: {value_env: PLACEHOLDER}", environment: Self.environment).configuration.resolvedDescription()
        #expect(described.contains("placeholder: ****** (from env PLACEHOLDER)"))
        #expect(described.contains("scrub: true"))
        #expect(!described.contains(Self.value))
    }

    @Test func valueFileIsReadWithoutItsNewline() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("placeholder", Self.value + "\n")
        let route = try parse(minimalYAML + "\nplaceholder: {value_file: \(folder.path)/placeholder}").configuration.routes[0]
        #expect(route.placeholder?.callers == [PlaceholderCaller(name: "default", value: Self.value)])
        #expect(
            try parse(minimalYAML + "\nplaceholder: {value_file: \(folder.path)/placeholder}").configuration.watchedFiles.contains(
                folder.resolved + "/placeholder"))
    }

    @Test func aTopLevelScrubIsEveryRoutesDefault() throws {
        let yaml = """
            scrub: false
            routes:
              - name: one
                match: {path_prefix: /one/}
                upstream: https://one.example.com
                credentials: {type: static, token_env: TOKEN}
                placeholder: {value_env: PLACEHOLDER}
              - name: two
                match: {path_prefix: /two/}
                upstream: https://two.example.com
                credentials: {type: static, token_env: TOKEN}
                scrub: true
            """
        #expect(try parse(yaml, environment: Self.environment).configuration.routes.map(\.scrub) == [false, true])
    }

    @Test func aCallersFileIsReadWithItsCallers() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("callers", "# the agents\n\nagent-1 \(Self.value)\n  agent-2\tghp_0123456789abcdefghijklmnop\r\n")
        let yaml = minimalYAML + "\nplaceholder: {callers_file: \(folder.path)/callers}"
        let loaded = try parse(yaml)
        let placeholder = try #require(loaded.configuration.routes[0].placeholder)
        #expect(placeholder.callers.map(\.name) == ["agent-1", "agent-2"])
        #expect(placeholder.callers.map(\.value) == [Self.value, "ghp_0123456789abcdefghijklmnop"])
        #expect(placeholder.callersFile == folder.resolved + "/callers")
        let described = loaded.configuration.resolvedDescription()
        #expect(described.contains("(2 callers, values masked)"))
        #expect(!described.contains(Self.value))
    }

    @Test func aCallersFileErrorNamesTheFileAndLine() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("callers", "agent-1 \(Self.value)\nagent-1 \(Self.value)x\nagent-3 \(Self.value)\nagent 4 x\nbad/name \(Self.value)y\nagent-6 short\n")
        let found = errors(minimalYAML + "\nplaceholder: {callers_file: \(folder.path)/callers}")
        #expect(found.allSatisfy { $0.keyPath == "placeholder.callers_file" })
        let reasons = found.map(\.reason)
        #expect(reasons.count == 5)
        #expect(reasons[0].hasSuffix("/callers line 2: caller agent-1 is already named on line 1"))
        #expect(reasons[1].hasSuffix("line 3: caller agent-3 has the placeholder of line 1; each caller needs its own"))
        #expect(reasons[2].hasSuffix("line 4: expected CALLER-NAME VALUE (two words), found 3"))
        #expect(reasons[3].contains("line 5: the first word is not a caller name"))
        #expect(reasons[4].contains("line 6: the second word: a placeholder must be at least 22 characters long"))
        #expect(!reasons.joined().contains("bad/name") && !reasons.joined().contains("short"))
        #expect(!reasons.joined().contains(Self.value))
    }

    @Test func aMissingOrEmptyCallersFileIsAnError() throws {
        #expect(errors(minimalYAML + "\nplaceholder: {callers_file: /nonexistent/callers}").first?.reason.contains("cannot read /nonexistent/callers") == true)
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("callers", "# nobody yet\n")
        #expect(errors(minimalYAML + "\nplaceholder: {callers_file: \(folder.path)/callers}").first?.reason.contains("no caller") == true)
    }
}

/// `tokenproxy placeholder --shape`: the shapes taken and refused, and the values made.
@Suite struct PlaceholderShapeTests {
    @Test func aShapeIsFixedTextAroundOneRandomPart() throws {
        let shape = try PlaceholderShape.parse("sk-ant-api03-{random:64}-x").get()
        #expect(shape == PlaceholderShape(prefix: "sk-ant-api03-", randomCount: 64, suffix: "-x"))
        var generator = SystemRandomNumberGenerator()
        let value = shape.make(using: &generator)
        #expect(value.hasPrefix("sk-ant-api03-") && value.hasSuffix("-x") && value.utf8.count == 13 + 64 + 2)
        #expect(value.dropFirst(13).dropLast(2).utf8.allSatisfy { PlaceholderShape.alphabet.contains($0) })
        #expect(value != shape.make(using: &generator))
    }

    @Test func badShapesAreRefused() {
        for bad in ["sk-ant", "{random:21}", "a{random:30}b{random:30}", "a {random:30}", "x{random:}", "x{random:30", "x\t{random:30}", "é{random:30}"] {
            #expect(throws: PlaceholderShape.ShapeError.self, "\(bad)") { try PlaceholderShape.parse(bad).get() }
        }
        #expect((try? PlaceholderShape.parse("{random:22}").get()) != nil)
    }
}
