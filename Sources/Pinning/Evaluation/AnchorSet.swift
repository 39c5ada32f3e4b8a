import Foundation
import X509

/// The anchors one validation runs against, indexed by subject for path building.
///
/// Indexing every anchor by subject (hashing each distinguished name); with the platform's
/// hundred-odd roots that was a large share of an evaluation. The sets are built once per distinct
/// (platform roots, custom anchors) pair and reused; see ``AnchorSetCache``.
struct AnchorSet: Sendable {
    let certificates: [Certificate]
    let bySubject: [DistinguishedName: [Certificate]]

    init(_ certificates: [Certificate]) {
        self.certificates = certificates
        self.bySubject = Dictionary(grouping: certificates, by: \.subject)
    }

    /// The set for `anchors` alone (`roots` nil) or for `roots` followed by `anchors`, from the shared cache.
    static func of(roots: [Certificate]?, anchors: [Certificate]) -> AnchorSet {
        AnchorSetCache.shared.set(roots: roots, anchors: anchors)
    }
}

/// A few recently used anchor sets, most recent first. Arrays compare with `==`, which returns at once for the
/// same stored array (``TrustRoots/platform`` is one array for the life of the process) and otherwise compares
/// certificates, so a hit is always for equal contents.
final class AnchorSetCache: Sendable {
    static let shared = AnchorSetCache(capacity: 8)

    private struct Entry {
        var roots: [Certificate]?
        var anchors: [Certificate]
        var set: AnchorSet
    }

    private let capacity: Int
    /// Most recently used first.
    private let entries = LockedValueBox<[Entry]>([])

    init(capacity: Int) {
        self.capacity = capacity
    }

    func set(roots: [Certificate]?, anchors: [Certificate]) -> AnchorSet {
        let cached = self.entries.withLockedValue { entries -> AnchorSet? in
            guard let index = entries.firstIndex(where: { $0.roots == roots && $0.anchors == anchors }) else {
                return nil
            }
            let entry = entries[index]
            if index != 0 {
                entries.remove(at: index)
                entries.insert(entry, at: 0)
            }
            return entry.set
        }
        if let cached { return cached }
        // Built outside the lock; two threads may build the same set once each, which is harmless.
        let set = AnchorSet((roots ?? []) + anchors)
        self.entries.withLockedValue { entries in
            entries.insert(Entry(roots: roots, anchors: anchors, set: set), at: 0)
            if entries.count > self.capacity { entries.removeLast() }
        }
        return set
    }
}
