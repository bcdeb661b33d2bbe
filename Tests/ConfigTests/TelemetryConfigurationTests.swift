import Testing

@testable import Config

/// CONTRACT.md "Telemetry: OpenTelemetry traces and logs": the `telemetry:` keys, their defaults,
/// the `OTEL_*` variables that override them (only when the section is there) and the errors.
@Suite struct TelemetryConfigurationTests {
    @Test func withoutTheSectionNothingIsExportedWhateverTheVariables() throws {
        var environment = minimalEnvironment
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector:4318"
        #expect(try parse(minimalYAML, environment: environment).configuration.telemetry == nil)
    }

    @Test func keysLeftOutTakeTheContractsValues() throws {
        let telemetry = try #require(try parse(minimalYAML + "\ntelemetry: {}").configuration.telemetry)
        #expect(telemetry == TelemetryConfiguration())
        #expect(telemetry.tracesURL == "http://127.0.0.1:4318/v1/traces")
        #expect(telemetry.logsURL == "http://127.0.0.1:4318/v1/logs")
        #expect(telemetry.serviceName == "tokenproxy")
        #expect(telemetry.sampleRatio == 1)
    }

    @Test func theVariablesOverrideTheKeys() throws {
        var environment = minimalEnvironment
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector.example:4318/base/"
        environment["OTEL_SERVICE_NAME"] = "egress"
        environment["OTEL_EXPORTER_OTLP_HEADERS"] = "x-api-key=s3cret%2Cvalue, tenant = blue"
        environment["MY_HEADERS"] = "x-other=never-used"
        let yaml = minimalYAML + "\ntelemetry: {endpoint: 'http://127.0.0.1:1', service_name: mine, headers_env: MY_HEADERS, sample_ratio: 0.25}"
        let telemetry = try #require(try parse(yaml, environment: environment).configuration.telemetry)
        #expect(telemetry.tracesURL == "http://collector.example:4318/base/v1/traces")
        #expect(telemetry.serviceName == "egress")
        #expect(telemetry.sampleRatio == 0.25)
        #expect(telemetry.headers.map(\.name) == ["x-api-key", "tenant"])
        #expect(telemetry.headers.map(\.value.value) == ["s3cret,value", "blue"])
    }

    @Test func checkMasksTheHeaderValues() throws {
        var environment = minimalEnvironment
        environment["MY_HEADERS"] = "authorization=Basic%20c2VjcmV0LXZhbHVl"
        let loaded = try parse(minimalYAML + "\ntelemetry: {headers_env: MY_HEADERS}", environment: environment)
        let description = loaded.configuration.resolvedDescription()
        #expect(description.contains("telemetry.headers: authorization=****** (from env MY_HEADERS)"))
        #expect(!description.contains("c2VjcmV0LXZhbHVl"))
    }

    @Test func eachBadKeyIsNamedAndNoHeaderValueIsShown() {
        var environment = minimalEnvironment
        environment["MY_HEADERS"] = "x-key=top-secret-value,broken-pair-secret"
        let yaml =
            minimalYAML + """

                telemetry:
                  endpoint: ftp://collector
                  sample_ratio: 1.5
                  traces: yes
                  headers_env: MY_HEADERS
                  ca_file: /nonexistent/ca.pem
                  sampler: always
                """
        let found = parseError(yaml, environment: environment)?.all ?? []
        #expect(
            Set(found.map(\.keyPath)) == [
                "telemetry.sampler", "telemetry.endpoint", "telemetry.sample_ratio", "telemetry.traces", "telemetry.headers_env", "telemetry.ca_file",
            ])
        #expect(!found.contains { $0.reason.contains("secret") })
    }

    @Test func anUnsetHeadersVariableAndABadEndpointVariableAreNamed() {
        var environment = minimalEnvironment
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "not a url"
        let found = parseError(minimalYAML + "\ntelemetry: {headers_env: NOT_SET_HERE}", environment: environment)?.all ?? []
        #expect(found.map(\.keyPath) == ["OTEL_EXPORTER_OTLP_ENDPOINT", "telemetry.headers_env"])
        #expect(found.last?.reason.contains("NOT_SET_HERE is not set") == true)
    }
}
