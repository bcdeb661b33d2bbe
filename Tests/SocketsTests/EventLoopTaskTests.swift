import Synchronization
import Testing

@testable import Sockets

/// A `LoopTask` that records its name when it runs, and may schedule another task then.
private final class RecordingTask: LoopTask {
    let name: String
    let loop: EventLoop
    let log: (String) -> Void
    var then: RecordingTask?
    var stopsLoop = false

    init(_ name: String, loop: EventLoop, log: @escaping (String) -> Void) {
        self.name = name
        self.loop = loop
        self.log = log
    }

    func runLoopTask() {
        log(name)
        if let then { loop.schedule(task: then) }
        if stopsLoop { loop.stop() }
    }
}

@Suite("event loop: tasks and work from other threads")
struct EventLoopTaskTests {
    @Test("tasks run in the order they were scheduled; one scheduled while tasks run waits for the next turn")
    func tasksRunInOrder() throws {
        let loop = try EventLoop(index: 0)
        var ran: [String] = []
        let log: (String) -> Void = { ran.append($0) }
        let a = RecordingTask("a", loop: loop, log: log)
        let b = RecordingTask("b", loop: loop, log: log)
        let c = RecordingTask("c", loop: loop, log: log)
        let d = RecordingTask("d", loop: loop, log: log)
        a.then = c
        c.stopsLoop = true
        loop.schedule(task: a)
        loop.schedule(task: b)
        // A timer of 0 queued in the same turn runs after that turn's tasks.
        loop.schedule(after: 0) { ran.append("timer") }
        loop.schedule(task: d)
        runUntilStopped(loop)
        #expect(ran == ["a", "b", "d", "timer", "c"])
    }

    @Test("the same task scheduled twice runs twice")
    func aTaskScheduledTwiceRunsTwice() throws {
        let loop = try EventLoop(index: 0)
        var ran: [String] = []
        let task = RecordingTask("t", loop: loop) { ran.append($0) }
        loop.schedule(task: task)
        loop.schedule(task: task)
        loop.schedule(after: 0.01) { loop.stop() }
        runUntilStopped(loop)
        #expect(ran == ["t", "t"])
    }

    @Test("work handed over from other threads runs on the loop's thread, in the order each thread sent it")
    func executeFromOtherThreads() throws {
        let loop = try EventLoop(index: 0)
        let perThread = 500
        let threads = 4
        let loopThread = OSThread.currentID  // runUntilStopped runs the loop on this thread
        // Written only on the loop's thread; read after the loop stopped.
        nonisolated(unsafe) var received: [[Int]] = Array(repeating: [], count: threads)
        nonisolated(unsafe) var wrongThread = 0
        for t in 0..<threads {
            try OSThread.start(name: "tp-test-\(t)") {
                for i in 0..<perThread {
                    loop.execute {
                        if OSThread.currentID != loopThread { wrongThread += 1 }
                        received[t].append(i)
                        if received.allSatisfy({ $0.count == perThread }) { loop.stop() }
                    }
                }
            }
        }
        runUntilStopped(loop)
        #expect(wrongThread == 0)
        for t in 0..<threads { #expect(received[t] == Array(0..<perThread)) }
    }
}
