// Sphinx 9.0's Chinese search data ends with `window.Stemmer = ChineseStemmer;` but ships the
// English Snowball stemmer (Latin words in Chinese pages are stemmed as English), which defines
// only `EnglishStemmer`; without this alias every Chinese page throws a ReferenceError and search
// finds nothing.
function ChineseStemmer() {
  return new EnglishStemmer();
}
