import Foundation
import Synchronization
import Testing

@testable import Logs

@Suite struct AuditEventTests {
    /// 2026-11-22T03:00:00.042Z
    static let seconds = 1_795_316_400

    /// A request forwarded with every member but `reason`, `address` and `trace_id` set.
    static func forwardedRequest() -> AuditEvent {
        var event = AuditEvent(kind: .request, seconds: Self.seconds, milliseconds: 42)
        event.decision = .forwarded
        event.route = "github"
        event.caller = "default"
        event.client = "127.0.0.1"
        event.method = "GET"
        event.host = "api.github.com"
        event.path = "/user"
        event.status = 200
        event.upstreamStatus = 200
        event.credential = "static"
        event.placement = "authorization"
        event.placeholder = false
        event.scrubbed = 0
        return event
    }

    @Test func aForwardedRequestHasTheContractsMembersInTheContractsOrder() throws {
        #expect(
            Self.forwardedRequest().line
                == #"{"ts":"2026-11-22T03:00:00.042Z","event":"request","decision":"forwarded","route":"github","caller":"default","client":"127.0.0.1","method":"GET","host":"api.github.com","path":"/user","status":200,"upstream_status":200,"credential":"static","placement":"authorization","placeholder":false,"scrubbed":0}"#
                + "\n")
    }

    @Test func aRefusalCarriesItsReasonAndNoUpstreamStatus() throws {
        var event = AuditEvent(kind: .request, seconds: Self.seconds, milliseconds: 0)
        event.decision = .refused
        event.reason = "forbidden_path"
        event.status = 403
        let object = try Self.object(event.line)
        #expect(object["reason"] as? String == "forbidden_path")
        #expect(object["decision"] as? String == "refused")
        #expect(object["upstream_status"] == nil)
        #expect(object["route"] == nil)
    }

    @Test func aCredentialEventHasOnlyItsMembersAndAReasonOnlyOnAFailure() throws {
        let failed = AuditEvent.credential(
            route: "api", credential: "oauth2_refresh", action: .refresh, outcome: .failure, reason: "network", seconds: Self.seconds, milliseconds: 5)
        #expect(
            failed.line
                == #"{"ts":"2026-11-22T03:00:00.005Z","event":"credential","route":"api","credential":"oauth2_refresh","action":"refresh","outcome":"failure","reason":"network"}"#
                + "\n")
        let succeeded = AuditEvent.credential(
            route: "api", credential: "github_app", action: .mint, outcome: .success, reason: "ignored", seconds: Self.seconds, milliseconds: 5)
        #expect(try Self.object(succeeded.line).keys.sorted() == ["action", "credential", "event", "outcome", "route", "ts"])
    }

    @Test func textFromTheClientStaysOneLineOfValidJSON() throws {
        var event = AuditEvent(kind: .request, seconds: Self.seconds, milliseconds: 0)
        event.path = "/a\"b\\c\n{\"event\":\"forged\"}\u{2028}"
        event.host = "x\r\ny"
        let line = event.line
        #expect(line.filter { $0 == "\n" }.count == 1 && line.hasSuffix("\n"))
        let object = try Self.object(line)
        #expect(object["path"] as? String == "/a\"b\\c\n{\"event\":\"forged\"}\u{2028}")
        #expect(object["event"] as? String == "request")
    }

    @Test func theOTLPAttributesAreTheLinesMembersInTheLinesOrder() throws {
        // Every member a request (or CONNECT) line can have but `reason`.
        var event = Self.forwardedRequest()
        event.address = "192.0.2.1"
        event.traceID = "0af7651916cd43dd8448eb211c80319c"
        let object = try Self.object(event.line)
        let names = event.attributes.map(\.name)
        #expect(["ts"] + names == Self.keys(event.line))
        for (name, value) in event.attributes {
            switch name {
            case "placeholder": #expect((object[name] as? Bool).map { String($0) } == value)
            case "status", "upstream_status", "scrubbed": #expect((object[name] as? Int).map { String($0) } == value, "\(name)")
            default: #expect(object[name] as? String == value, "\(name)")
            }
        }
    }

    /// The keys of a line in its order.
    static func keys(_ line: String) -> [String] {
        line.split(separator: ",").compactMap { member in
            let name = member.drop { $0 == "{" }.prefix { $0 != ":" }
            return name.hasPrefix("\"") ? String(name.dropFirst().dropLast()) : nil
        }
    }

    static func object(_ line: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }
}

@Suite struct AuditTimestampTests {
    @Test(arguments: [(0, 0), (951_782_400, 7), (1_795_316_400, 999), (4_102_444_799, 120)])
    func theTimestampIsTheLogHandlersToTheMillisecond(seconds: Int, milliseconds: Int) {
        var out: [UInt8] = []
        AuditEvent.appendTimestamp(seconds: seconds, milliseconds: milliseconds, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "\"" + TokenproxyLogHandler.timestamp(epochSeconds: seconds, milliseconds: milliseconds) + "\"")
    }

    @Test(arguments: [(0, 1, "0"), (7, 3, "007"), (1234, 2, "1234"), (-5, 1, "-5"), (Int.max, 1, String(Int.max))])
    func numbersAreWrittenInDecimal(value: Int, width: Int, expected: String) {
        var out: [UInt8] = []
        AuditEvent.appendDecimal(value, width: width, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == expected)
    }
}

@Suite struct AuditLogCountTests {
    @Test func aLineThatCannotBeWrittenIsCountedAsLost() {
        let log = AuditLog()
        let buffer = AuditLineBuffer()
        #expect(!log.write(AuditEvent(kind: .request, seconds: 0, milliseconds: 0), buffer: buffer), "nothing is open")
        #expect(log.lost.load(ordering: .relaxed) == 1)
        // Lines gathered for one write are each counted.
        log.append(AuditEvent(kind: .request, seconds: 0, milliseconds: 0), to: buffer)
        log.append(AuditEvent(kind: .connect, seconds: 0, milliseconds: 0), to: buffer)
        #expect(!log.write(buffer))
        #expect(log.lost.load(ordering: .relaxed) == 3)
        #expect(buffer.isEmpty)
    }
}
