public enum _P2 {}
