import Testing

@testable import Sockets

/// The spool folder must be the process's own, mode 0700, not a symbolic link (CONTRACT
/// `forward.request_buffering_disk`): what `check`, `serve` and each new spool file refuse.
@Suite struct PrivateFolderTests {
    static let own = PathStatus(isSymbolicLink: false, isFolder: true, owner: 1000, permissions: 0o700)

    @Test func theProcesssOwn0700FolderOrNothingYetIsFine() {
        #expect(PrivateFolder.problem("/s", Self.own, processOwner: 1000) == nil)
        #expect(PrivateFolder.problem("/s", nil, processOwner: 1000) == nil, "made 0700 when first needed")
    }

    @Test(arguments: [
        (PathStatus(isSymbolicLink: true, isFolder: false, owner: 1000, permissions: 0o777), "/s is a symbolic link"),
        (PathStatus(isSymbolicLink: false, isFolder: false, owner: 1000, permissions: 0o600), "/s is not a folder"),
        (PathStatus(isSymbolicLink: false, isFolder: true, owner: 65534, permissions: 0o700), "/s is owned by uid 65534"),
        (PathStatus(isSymbolicLink: false, isFolder: true, owner: 1000, permissions: 0o755), "/s has mode 0755"),
        (PathStatus(isSymbolicLink: false, isFolder: true, owner: 1000, permissions: 0o1777), "/s has mode 01777"),
    ])
    func anythingElseIsRefusedSayingWhy(_ status: PathStatus, _ reason: String) throws {
        let problem = try #require(PrivateFolder.problem("/s", status, processOwner: 1000))
        #expect(problem.hasPrefix(reason + ": "), "\(problem)")
        #expect(problem.hasSuffix("it must be a folder of the user tokenproxy runs as (uid 1000), mode 0700"))
    }
}
