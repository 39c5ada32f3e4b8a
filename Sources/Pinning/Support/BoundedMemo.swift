/// At most ``capacity`` keys with their values, the oldest forgotten first (insertion order kept in a ring): the
/// storage of the process-wide memos (``CertificateFactsMemo``, ``VerifiedLinkMemo``), each behind its own lock.
///
/// Both tables are sized for ``capacity`` at once, so no insert ever pays for growing them (a resize rehashed and
/// moved every key, and faulted in fresh pages, on the first sightings of a young process). What that reserves:
/// `Dictionary(minimumCapacity:)` rounds its buckets up to a power of two at a load of 3/4 and stores each
/// bucket's key and value inline, and the ring holds one key per entry. A key (``SampledKey``) is 16 bytes; a
/// facts memo value is a reference (8 bytes), a verified link none (`Void`). So the facts memo (2048 entries)
/// takes 4096 buckets × 24 bytes plus a 2048 × 16-byte ring, 128 KB, and the verified-link memo (4096 entries)
/// 8192 × 16 bytes plus 4096 × 16, 192 KB: about 320 KB for the two, besides the facts themselves.
struct BoundedMemo<Key: Hashable, Value> {
    /// The most keys held.
    let capacity: Int
    private var values: [Key: Value]
    /// Insertion order, a ring: `next` is the oldest once the ring is full.
    private var order: [Key] = []
    private var next = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a memo needs room for one entry")
        self.capacity = capacity
        self.values = Dictionary(minimumCapacity: capacity)
        self.order.reserveCapacity(capacity)
    }

    /// The value held for `key`, or nil.
    subscript(key: Key) -> Value? { self.values[key] }

    /// How many keys are held now.
    var count: Int { self.values.count }

    /// Forgets every key, keeping the storage: a memo emptied for a benchmark's first sighting then costs what a
    /// memo of a long-running process costs, whose tables are allocated already (inserting into a table grown
    /// from nothing allocates and rehashes, which no steady-state first sighting pays).
    mutating func removeAll() {
        self.values.removeAll(keepingCapacity: true)
        self.order.removeAll(keepingCapacity: true)
        self.next = 0
    }

    /// Holds `value` for `key`. A key already held gets the new value and keeps its place in the order; a new
    /// one, when the memo is full, takes the place of the oldest.
    mutating func remember(_ value: Value, for key: Key) {
        guard self.values.updateValue(value, forKey: key) == nil else { return }
        if self.order.count < self.capacity {
            self.order.append(key)
        } else {
            self.values[self.order[self.next]] = nil
            self.order[self.next] = key
            self.next = (self.next + 1) % self.capacity
        }
    }
}

/// A key of a ``BoundedMemo`` that holds a large value (one certificate, or a pair) by reference, with the value's
/// hash computed once, when the key is made.
///
/// `Certificate` is a large value: swift-certificates keeps the parsed TBSCertificate inline (serial number,
/// names, validity, public key, unique identifiers, extensions) beside three byte slices, each field with its
/// own reference to retain. A ``BoundedMemo`` holds every key twice (its table and its insertion ring), so keys
/// holding certificates inline made each insert copy them in twice, each growth of the table or the ring move
/// every key and fault in fresh pages, and each growth and eviction hash every moved key's sample again
/// (issue 31, perf: about 12 µs of a fresh leaf's handshake went to the verified-link memo's insert, 5 of them
/// copying keys into freshly faulted-in pages as the tables grew). The table and the ring now share one box per
/// key, 16 bytes each.
///
/// Equality is the value's own (for certificates: every byte of each), so what a memo holds and finds is
/// unchanged: equal values have equal hashes, and two keys are equal only if their values are (the same box, or
/// equal hashes and equal values).
struct SampledKey<Value: Equatable & Sendable>: Hashable, Sendable {
    private final class Box: Sendable {
        let value: Value

        init(_ value: Value) {
            self.value = value
        }
    }

    private let box: Box
    private let hash: Int

    /// `value`, hashed by what `sample` feeds a hasher (it must feed the same for equal values).
    init(_ value: Value, sample: (Value, inout Hasher) -> Void) {
        var hasher = Hasher()
        sample(value, &hasher)
        self.hash = hasher.finalize()
        self.box = Box(value)
    }

    static func == (lhs: SampledKey, rhs: SampledKey) -> Bool {
        lhs.hash == rhs.hash && (lhs.box === rhs.box || lhs.box.value == rhs.box.value)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(self.hash)
    }
}
