SELECT {'a': 1, b.c, d AS e} FROM b -- comment
/* block */