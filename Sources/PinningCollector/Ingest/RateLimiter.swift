import Foundation
import NIOConcurrencyHelpers

/// Reports accepted per source per minute (`--rate N/min`): a token bucket per source, holding up to N reports
/// and refilled at N per minute, so a source may send a burst of N and then N a minute.
///
/// Memory is bounded under a flood from many addresses: at most ``maximumSources`` buckets are kept; when that is
/// reached, the buckets that are full again (their sources idle for a minute or more) are dropped, and if none is,
/// new sources share one overflow bucket, so a flood of fresh addresses is limited as one source.
public final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Double
    }
    private struct State {
        var buckets: [String: Bucket] = [:]
        var overflow = Bucket(tokens: 0, updated: 0)
        var lastPrune = -Double.infinity
    }

    public let perMinute: Int
    public let maximumSources: Int
    private let state = NIOLockedValueBox(State())

    public init(perMinute: Int, maximumSources: Int = 100_000) {
        self.perMinute = perMinute
        self.maximumSources = maximumSources
        self.state.withLockedValue { $0.overflow = Bucket(tokens: Double(perMinute), updated: 0) }
    }

    /// Takes `count` tokens for `source` at `now` (seconds).
    ///
    /// - Returns: nil when allowed, or the seconds until that many tokens would be there (`Retry-After`).
    public func take(_ count: Int, source: String, now: Double) -> Double? {
        let capacity = Double(self.perMinute)
        let rate = capacity / 60
        return self.state.withLockedValue { state -> Double? in
            func refill(_ bucket: inout Bucket) {
                bucket.tokens = min(capacity, bucket.tokens + max(0, now - bucket.updated) * rate)
                bucket.updated = now
            }
            func spend(_ bucket: inout Bucket) -> Double? {
                refill(&bucket)
                guard Double(count) <= bucket.tokens else {
                    return Double(count) > capacity ? 60 : (Double(count) - bucket.tokens) / rate
                }
                bucket.tokens -= Double(count)
                return nil
            }
            if var bucket = state.buckets[source] {
                let wait = spend(&bucket)
                state.buckets[source] = bucket
                return wait
            }
            // Pruning walks every bucket: at most once a second, so a flood of new addresses costs no more.
            if state.buckets.count >= self.maximumSources, now - state.lastPrune >= 1 {
                state.lastPrune = now
                state.buckets = state.buckets.filter { _, bucket in
                    bucket.tokens + max(0, now - bucket.updated) * rate < capacity
                }
            }
            if state.buckets.count >= self.maximumSources {
                return spend(&state.overflow)
            }
            var bucket = Bucket(tokens: capacity, updated: now)
            let wait = spend(&bucket)
            state.buckets[source] = bucket
            return wait
        }
    }

    /// Sources tracked now (tests, metrics).
    public var trackedSources: Int { self.state.withLockedValue { $0.buckets.count } }
}
