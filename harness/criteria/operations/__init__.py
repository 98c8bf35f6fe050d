"""Operations criteria (ACCEPTANCE.md, Operations 1-3)."""
